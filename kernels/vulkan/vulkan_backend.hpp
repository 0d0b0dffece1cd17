// SPDX-License-Identifier: Apache-2.0
// The Vulkan backend: one crossfire device per Vulkan physical device (vulkan:N), a pooled sub-allocator per
// device, and command buffers recorded per op and submitted in batches.
//
// Note [Vulkan batches and deferred frees]
// Kernels never wait. Each op records its dispatch (with a barrier before it only when it reads or writes a buffer
// written since the last barrier) into the device's current command buffer; the buffer is submitted when it holds
// kBatchDispatches dispatches, or when the host needs a result (read(), synchronize(), a kernel that must look at
// data, e.g. index_select checking its indices). Every allocation remembers the serial of the last batch that
// used it. release() of a tensor whose last batch has not signalled its fence yet does not return the memory to
// the pool: the chunk waits on that batch's list and goes back when the fence signals, so a pending dispatch never
// reads memory that a new tensor already owns, and memory is never reused inside one batch (which is why a batch
// only needs read-after-write barriers).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <vulkan/vulkan_core.h>

#include "crossfire/backend.hpp"
#include "vulkan_loader.hpp"

namespace crossfire::vulkan {

// CROSSFIRE_VULKAN_VALIDATION=1 enables VK_LAYER_KHRONOS_validation; every message it sends is counted, printed to
// stderr and kept, and the Vulkan tests assert that the count is zero.
inline constexpr const char* kValidationEnv = "CROSSFIRE_VULKAN_VALIDATION";
// CROSSFIRE_VULKAN_STAGING=1 forces staging-buffer transfers even where device memory is host-visible (lavapipe,
// integrated GPUs), so that the discrete-GPU path is tested on every machine.
inline constexpr const char* kStagingEnv = "CROSSFIRE_VULKAN_STAGING";
// CROSSFIRE_VULKAN_MEMORY_LIMIT=<bytes> caps each device's pool (default: the device-local heap's size).
inline constexpr const char* kMemoryLimitEnv = "CROSSFIRE_VULKAN_MEMORY_LIMIT";

// CROSSFIRE_VULKAN_PIPELINE_CACHE=<dir> keeps compiled pipelines across processes (default: $XDG_CACHE_HOME or
// ~/.cache, under crossfire/; "0" turns it off). Each test is its own process, and compiling a pipeline costs a
// software driver tens of milliseconds.
inline constexpr const char* kPipelineCacheEnv = "CROSSFIRE_VULKAN_PIPELINE_CACHE";

// CROSSFIRE_VULKAN_SPECIALIZED=0 creates every pipeline from its generic module and specialization constants instead
// of from a module with the constants folded in at build time (Note [Specialized SPIR-V] in vulkan_backend.cpp):
// slower to create, the same kernels; for telling a driver's or spirv-opt's fault from crossfire's.
inline constexpr const char* kSpecializedEnv = "CROSSFIRE_VULKAN_SPECIALIZED";

// LP_NUM_THREADS, llvmpipe's own variable: crossfire sets it to 0 when it is unset (Note [lavapipe without its thread
// pool] in vulkan_backend.cpp).
inline constexpr const char* kLavapipeThreadsEnv = "LP_NUM_THREADS";

inline constexpr uint32_t kBatchDispatches = 64;   // commands recorded before a batch is submitted
inline constexpr uint32_t kMaxInFlight = 8;        // submitted batches before the oldest is waited for
inline constexpr VkDeviceSize kChunkAlign = 256;   // >= every device's minStorageBufferOffsetAlignment
inline constexpr uint32_t kPushBytes = 128;        // the push-constant block every shader shares

class Context;

// One VkDeviceMemory + VkBuffer that the pool carves into chunks.
struct Block {
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  VkDeviceSize bump = 0;    // carved up to here
  char* mapped = nullptr;   // host pointer when the memory is host-visible
  bool dedicated = false;   // one chunk only (large tensors)
};

struct Chunk {
  Block* block = nullptr;
  VkDeviceSize offset = 0;
  VkDeviceSize size = 0;  // the size class, >= the tensor's bytes
};

// backend_state of every Vulkan TensorImpl.
struct Allocation {
  Chunk chunk;
  uint64_t last_use = 0;    // serial of the last batch that read or wrote it (0: none)
  uint64_t last_write = 0;  // serial of the last batch that wrote it
  uint32_t barrier_epoch = 0;  // == the batch's epoch when written since the last barrier
  VkDeviceSize range = 0;  // bytes bound in descriptors (nbytes rounded up to 4, at least 4)
};

struct PoolStats {
  uint64_t device_allocations = 0;  // vkAllocateMemory calls so far
  uint64_t bytes_reserved = 0;      // VkDeviceMemory held
  uint64_t chunks_live = 0;
  uint64_t chunks_reused = 0;       // allocations served from a free list
  uint64_t deferred_frees = 0;      // releases that waited for a pending batch
  uint64_t batches_submitted = 0;
  uint64_t barriers = 0;
};

// A pooled sub-allocator over one memory type: size classes with free lists, carved from big blocks.
class Pool {
 public:
  Pool(Context& ctx, uint32_t memory_type, bool host_visible, VkDeviceSize limit);
  ~Pool();
  // Throws OutOfMemory naming `op`.
  Chunk allocate(VkDeviceSize bytes, std::string_view op);
  void free(const Chunk& c);
  void set_limit(VkDeviceSize limit) { limit_ = limit; }
  VkDeviceSize limit() const { return limit_; }
  static VkDeviceSize size_class(VkDeviceSize bytes);

 private:
  Block* new_block(VkDeviceSize size, bool dedicated, std::string_view op, VkDeviceSize want);
  void destroy(Block* b);
  Context& ctx_;
  uint32_t type_;
  bool host_visible_;
  VkDeviceSize limit_;
  VkDeviceSize reserved_ = 0;
  VkDeviceSize next_block_ = VkDeviceSize(4) << 20;
  std::vector<std::unique_ptr<Block>> blocks_;
  Block* current_ = nullptr;
  std::unordered_map<VkDeviceSize, std::vector<Chunk>> free_;  // by size class
};

class VulkanBackend;

// Everything one Vulkan device needs. Created on first use of vulkan:N.
class Context {
 public:
  Context(VulkanBackend& backend, int index, VkPhysicalDevice physical);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Vk& vk;
  VulkanBackend& backend;
  Device device;
  VkPhysicalDevice physical;
  VkDevice dev = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties mem_props{};
  bool has_f64 = false;
  bool unified = false;  // device memory is host-visible: transfers are memcpy

  // ---- memory ------------------------------------------------------------------------------------------------
  void release_chunk(Allocation* a);                                  // deferred while a batch uses it
  void write(Allocation& a, const void* src, size_t n);
  void read(Allocation& a, void* dst, size_t n, std::string_view op);
  void copy(Allocation& src, Allocation& dst, size_t n);
  void fill(Allocation& dst, uint32_t pattern, std::string_view op);

  // ---- recording -----------------------------------------------------------------------------------------------
  // A cached pipeline for module `module` with specialization constants `spec` (constant_id 0..).
  VkPipeline pipeline(std::string_view module, std::span<const int32_t> spec, std::string_view op);
  // Records one dispatch. bufs[0] is written, the rest are read; an empty slot binds bufs[0].
  void dispatch(VkPipeline p, std::span<Allocation* const> bufs, const void* push, size_t push_size, uint32_t gx,
                uint32_t gy, uint32_t gz, std::string_view op);
  void flush(std::string_view op);                       // submits the current batch, if any
  void wait_serial(uint64_t serial, std::string_view op);  // waits until batch `serial` completed
  void synchronize(std::string_view op);
  uint64_t recording_serial() const { return serial_; }
  void check_lost(std::string_view op) const;
  [[noreturn]] void fail(std::string_view op, std::string_view what, VkResult r);

  PoolStats stats;
  Pool& pool() { return *pool_; }
  bool fail_next_pipeline = false;  // test hook: the next pipeline creation fails
  // Pipelines from the build's specialized modules where there is one (kSpecializedEnv; tests switch it).
  bool use_specialized = true;
  // Pipelines with constants created from their generic module while use_specialized was on: a pipeline the build
  // listed no specialized module for (pipeline_specs.hpp; the tests hold it at zero where the build has them).
  size_t generic_pipelines = 0;

 private:
  struct Batch {
    uint64_t serial = 0;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    std::vector<VkDescriptorPool> pools;
    size_t pool_index = 0;
    uint32_t sets_in_pool = 0;
    uint32_t commands = 0;
    std::vector<Chunk> deferred;        // device chunks freed while this batch was pending
    std::vector<Chunk> staging;         // staging chunks this batch reads or writes
    bool ran_new_pipeline = false;      // the first dispatch of a new pipeline (Note [Idle before exit])
  };
  Batch& recording(std::string_view op);   // the batch being recorded, begun if needed
  void retire_completed(bool block_on_oldest, std::string_view op);
  void recycle(Batch& b);
  VkDescriptorSet descriptor_set(Batch& b, std::string_view op);
  void barrier_if_needed(Batch& b, std::span<Allocation* const> bufs);
  void use(Allocation& a, bool write);

  void save_pipeline_cache();
  VkShaderModule shader_module(std::string_view name, std::span<const uint32_t> code, std::string_view op);
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  std::string pipeline_cache_path_;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  std::unordered_map<std::string, VkShaderModule> modules_;
  std::unordered_map<uint64_t, VkPipeline> pipelines_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Pool> staging_pool_;  // host-visible; null when unified
  std::unique_ptr<Batch> current_;
  std::deque<std::unique_ptr<Batch>> in_flight_;
  std::vector<std::unique_ptr<Batch>> spare_;
  uint64_t serial_ = 1;     // serial of the batch being recorded (or the next one)
  bool await_new_pipeline_ = false;  // a pipeline was created: wait for its first dispatch (Note [Idle before exit])
  uint64_t completed_ = 0;  // every batch <= this has completed
  uint32_t epoch_ = 1;      // bumps at every barrier and every new batch
  bool lost_ = false;
  friend class Pool;
 public:
  std::recursive_mutex mu;
};

class VulkanBackend final : public Backend {
 public:
  VulkanBackend();
  ~VulkanBackend() override;
  std::string unavailable_reason() const override {
    init();
    return reason_;
  }
  int device_count() const override {
    init();
    return int(physical_.size());
  }
  DeviceInfo device_info(int index) const override;
  // Waits for every device this backend opened to go idle, skipping one another thread is using (called at exit:
  // Note [Idle before exit] in vulkan_backend.cpp).
  void wait_idle_at_exit();
  // Workgroups of 64 and 256 invocations; the reductions' and softmax's one-workgroup-per-row thresholds (64 and
  // 1,024 elements, 8,192 rows); conv2d's passes of 16,384 terms; llvmpipe's loop limiter (65,535 iterations, and
  // a third of it for a kernel that walks a row three times); the longest row a CPU-type device walks (2^22).
  // Note [A driver's loop limit] in vulkan_kernels.cpp.
  std::vector<int64_t> kernel_extents() const override {
    return {64, 256, 1024, 8192, 16384, 21845, 65535, int64_t(1) << 22};
  }
  TensorImpl* allocate(Device device, DType dtype, const Shape& shape, std::string_view op) override;
  void release(TensorImpl* t) override;
  void write(TensorImpl& t, const void* src) override;
  void read(const TensorImpl& t, void* dst) override;
  void copy(const TensorImpl& src, TensorImpl& dst) override;
  void synchronize() override;

  // Vulkan-specific, for tests and benchmarks.
  Context& context(int index);
  bool validation_enabled() const {
    init();
    return validation_;
  }
  uint64_t validation_messages() const { return validation_count_.load(); }
  std::vector<std::string> validation_log() const;
  PoolStats pool_stats(int index);
  void set_memory_limit(int index, uint64_t bytes);
  bool has_f64(int index) { return context(index).has_f64; }

  Vk vk;
  VkInstance instance = VK_NULL_HANDLE;

 private:
  // Note [Vulkan discovery is lazy]: loading the loader and every ICD it lists costs ~100-200 ms, so it happens on
  // the first question about Vulkan, not when the backend registry is built (CPU-only processes never pay it).
  void init() const { std::call_once(init_once_, [this] { const_cast<VulkanBackend*>(this)->discover(); }); }
  void discover();
  mutable std::once_flag init_once_;
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data, void* self);
  std::string reason_;
  bool validation_ = false;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::vector<VkPhysicalDevice> physical_;
  std::vector<DeviceInfo> infos_;
  std::vector<std::unique_ptr<Context>> contexts_;
  std::mutex contexts_mu_;
  bool registered_at_exit_ = false;  // (under contexts_mu_) Note [Idle before exit] in vulkan_backend.cpp
  std::atomic<uint64_t> validation_count_{0};
  mutable std::mutex log_mu_;
  std::vector<std::string> log_;
};

// The Vulkan allocation behind a tensor of this backend.
inline Allocation& alloc_of(const TensorImpl& t) { return *static_cast<Allocation*>(t.backend_state); }

// Registers every kernel (vulkan_kernels.cpp); one line per op.
void register_kernels(VulkanBackend& b);

// The SPIR-V of an embedded module (generated vulkan_shaders.cpp); empty when there is no such module.
std::span<const uint32_t> embedded_spirv(std::string_view name);
// The name under which the build embeds `module` specialized with `spec` (Note [Specialized SPIR-V] in
// vulkan_backend.cpp, and specialize_spirv.cmake, which writes it): `<module>-<c0>_<c1>_...`, in buf.
std::string_view specialized_name(std::string_view module, std::span<const int32_t> spec, std::string& buf);

}  // namespace crossfire::vulkan
