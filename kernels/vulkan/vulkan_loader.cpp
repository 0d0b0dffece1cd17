// SPDX-License-Identifier: Apache-2.0
#include "vulkan_loader.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

namespace crossfire::vulkan {

bool Vk::open(std::string* why) {
  const char* names[] = {"libvulkan.so.1", "libvulkan.so"};
  std::string errors;
  for (const char* n : names) {
    library = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (library) break;
    const char* e = dlerror();
    if (errors.empty() && e) errors = e;
  }
  if (!library) {
    *why = fmt::format("no Vulkan loader found ({})", errors.empty() ? "libvulkan.so.1 not found" : errors);
    return false;
  }
  vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(library, "vkGetInstanceProcAddr"));
  if (!vkGetInstanceProcAddr) {
    *why = "the Vulkan loader has no vkGetInstanceProcAddr";
    return false;
  }
#define CROSSFIRE_VK_LOAD_GLOBAL(name)                                                       \
  name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(VK_NULL_HANDLE, #name));       \
  if (!name) {                                                                               \
    *why = "the Vulkan loader lacks " #name;                                                 \
    return false;                                                                            \
  }
  CROSSFIRE_VK_GLOBAL_FNS(CROSSFIRE_VK_LOAD_GLOBAL)
#undef CROSSFIRE_VK_LOAD_GLOBAL
  return true;
}

bool Vk::load_instance(VkInstance instance, std::string* why) {
#define CROSSFIRE_VK_LOAD(name)                                                          \
  name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(instance, #name));         \
  if (!name) {                                                                           \
    *why = "the Vulkan implementation lacks " #name " (Vulkan 1.1 is required)";        \
    return false;                                                                        \
  }
  CROSSFIRE_VK_INSTANCE_FNS(CROSSFIRE_VK_LOAD)
  CROSSFIRE_VK_DEVICE_FNS(CROSSFIRE_VK_LOAD)
#undef CROSSFIRE_VK_LOAD
  vkCreateDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
  vkDestroyDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
      vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
  return true;
}

const char* result_name(VkResult r) {
  switch (r) {
#define CASE(x) \
  case x: return #x;
    CASE(VK_SUCCESS)
    CASE(VK_NOT_READY)
    CASE(VK_TIMEOUT)
    CASE(VK_INCOMPLETE)
    CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    CASE(VK_ERROR_INITIALIZATION_FAILED)
    CASE(VK_ERROR_DEVICE_LOST)
    CASE(VK_ERROR_MEMORY_MAP_FAILED)
    CASE(VK_ERROR_LAYER_NOT_PRESENT)
    CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    CASE(VK_ERROR_TOO_MANY_OBJECTS)
    CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    CASE(VK_ERROR_FRAGMENTED_POOL)
    CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    CASE(VK_ERROR_INVALID_SHADER_NV)
#undef CASE
    default: return "VK_ERROR_UNKNOWN";
  }
}

}  // namespace crossfire::vulkan
