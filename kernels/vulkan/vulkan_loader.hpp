// SPDX-License-Identifier: Apache-2.0
// The Vulkan loader, opened at run time. Building with VK_NO_PROTOTYPES and resolving every entry point through
// vkGetInstanceProcAddr means a machine without libvulkan (or with a broken driver) still starts: the backend just
// reports itself unavailable with the reason (contract section 1).
#pragma once

#include <string>

#include <vulkan/vulkan_core.h>

namespace crossfire::vulkan {

// Global (pre-instance) entry points.
#define CROSSFIRE_VK_GLOBAL_FNS(X) \
  X(vkCreateInstance)              \
  X(vkEnumerateInstanceLayerProperties) \
  X(vkEnumerateInstanceExtensionProperties)

// Instance and device entry points (device ones resolved through the instance: one table serves every device).
#define CROSSFIRE_VK_INSTANCE_FNS(X)          \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures)              \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)

#define CROSSFIRE_VK_DEVICE_FNS(X)     \
  X(vkDestroyDevice)                   \
  X(vkGetDeviceQueue)                  \
  X(vkDeviceWaitIdle)                  \
  X(vkQueueSubmit)                     \
  X(vkAllocateMemory)                  \
  X(vkFreeMemory)                      \
  X(vkMapMemory)                       \
  X(vkUnmapMemory)                     \
  X(vkCreateBuffer)                    \
  X(vkDestroyBuffer)                   \
  X(vkGetBufferMemoryRequirements)     \
  X(vkBindBufferMemory)                \
  X(vkCreateShaderModule)              \
  X(vkDestroyShaderModule)             \
  X(vkCreateDescriptorSetLayout)       \
  X(vkDestroyDescriptorSetLayout)      \
  X(vkCreatePipelineLayout)            \
  X(vkDestroyPipelineLayout)           \
  X(vkCreateComputePipelines)          \
  X(vkDestroyPipeline)                 \
  X(vkCreateDescriptorPool)            \
  X(vkDestroyDescriptorPool)           \
  X(vkResetDescriptorPool)             \
  X(vkAllocateDescriptorSets)          \
  X(vkUpdateDescriptorSets)            \
  X(vkCreateCommandPool)               \
  X(vkDestroyCommandPool)              \
  X(vkAllocateCommandBuffers)          \
  X(vkFreeCommandBuffers)              \
  X(vkBeginCommandBuffer)              \
  X(vkEndCommandBuffer)                \
  X(vkResetCommandBuffer)              \
  X(vkCmdBindPipeline)                 \
  X(vkCmdBindDescriptorSets)           \
  X(vkCmdPushConstants)                \
  X(vkCmdDispatch)                     \
  X(vkCmdPipelineBarrier)              \
  X(vkCmdCopyBuffer)                   \
  X(vkCmdFillBuffer)                   \
  X(vkCreateFence)                     \
  X(vkDestroyFence)                    \
  X(vkResetFences)                     \
  X(vkWaitForFences)                   \
  X(vkGetFenceStatus)                  \
  X(vkCreatePipelineCache)             \
  X(vkDestroyPipelineCache)            \
  X(vkGetPipelineCacheData)

#define CROSSFIRE_VK_DECLARE(name) PFN_##name name = nullptr;

struct Vk {
  void* library = nullptr;
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  CROSSFIRE_VK_GLOBAL_FNS(CROSSFIRE_VK_DECLARE)
  CROSSFIRE_VK_INSTANCE_FNS(CROSSFIRE_VK_DECLARE)
  CROSSFIRE_VK_DEVICE_FNS(CROSSFIRE_VK_DECLARE)
  // Optional (VK_EXT_debug_utils, only with validation on).
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT = nullptr;

  // Opens the loader; on failure returns false with `why` set to a one-line reason.
  bool open(std::string* why);
  // Resolves the instance and device entry points; false (with `why`) when any is missing.
  bool load_instance(VkInstance instance, std::string* why);
};

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and friends.
const char* result_name(VkResult r);

}  // namespace crossfire::vulkan
