// SPDX-License-Identifier: Apache-2.0
// The Vulkan backend's device side: discovery, the pooled allocator, transfers, pipelines and batched submission.
// Kernels (what each op records) live in vulkan_kernels.cpp. See Note [Vulkan batches and deferred frees].
#include "vulkan_backend.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include <unistd.h>

#include <fmt/format.h>

#include "crossfire/error.hpp"

namespace crossfire::vulkan {

namespace {

constexpr VkDeviceSize kMaxBlock = VkDeviceSize(64) << 20;      // carved blocks grow from 4 MiB up to this
constexpr VkDeviceSize kDedicated = VkDeviceSize(32) << 20;     // larger chunks get a block of their own
constexpr uint32_t kSetsPerPool = 128;
constexpr uint32_t kBindings = 4;
constexpr uint64_t kFenceTimeoutNs = uint64_t(120) * 1000 * 1000 * 1000;  // a hang becomes a BackendFailure

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 && std::strcmp(v, "0") != 0;
}

// A zeroed Vulkan info struct with its sType set.
template <class T>
T vk_struct(VkStructureType type) {
  T t{};
  t.sType = type;
  return t;
}

VkDeviceSize round_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

// A tensor's metadata and its allocation in one heap object (cf. Note [One allocation per tensor]).
struct VkTensor {
  TensorImpl impl;
  Allocation alloc;
};
VkTensor* tensor_of(TensorImpl* t) {
  return reinterpret_cast<VkTensor*>(reinterpret_cast<char*>(t) - offsetof(VkTensor, impl));
}

std::string device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    default: return "other";
  }
}

uint64_t fnv1a(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

}  // namespace

// =====================================================================================================================
// Pool
// =====================================================================================================================

Pool::Pool(Context& ctx, uint32_t memory_type, bool host_visible, VkDeviceSize limit)
    : ctx_(ctx), type_(memory_type), host_visible_(host_visible), limit_(limit) {}

Pool::~Pool() {
  for (auto& b : blocks_) destroy(b.get());
}

VkDeviceSize Pool::size_class(VkDeviceSize bytes) {
  // Four classes per power of two (waste < 25%), every class a multiple of kChunkAlign.
  if (bytes <= kChunkAlign) return kChunkAlign;
  int k = 63 - __builtin_clzll(bytes);
  VkDeviceSize step = std::max<VkDeviceSize>(VkDeviceSize(1) << k >> 2, 1);
  return round_up(round_up(bytes, step), kChunkAlign);
}

void Pool::destroy(Block* b) {
  const Vk& vk = ctx_.vk;
  if (b->mapped) vk.vkUnmapMemory(ctx_.dev, b->memory);
  if (b->buffer) vk.vkDestroyBuffer(ctx_.dev, b->buffer, nullptr);
  if (b->memory) vk.vkFreeMemory(ctx_.dev, b->memory, nullptr);
  reserved_ -= b->size;
  ctx_.stats.bytes_reserved = reserved_;
  b->memory = VK_NULL_HANDLE;
  b->buffer = VK_NULL_HANDLE;
  b->mapped = nullptr;
}

Block* Pool::new_block(VkDeviceSize size, bool dedicated, std::string_view op, VkDeviceSize want) {
  const Vk& vk = ctx_.vk;
  if (reserved_ + size > limit_) {
    // Give back cached dedicated blocks nobody uses before refusing.
    for (auto it = free_.begin(); it != free_.end();) {
      if (it->first > kDedicated) {
        for (Chunk& c : it->second) {
          destroy(c.block);
          std::erase_if(blocks_, [&](const std::unique_ptr<Block>& b) { return b.get() == c.block; });
        }
        it = free_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (reserved_ + size > limit_)
    throw OutOfMemory(std::string(op), ctx_.device, size_t(want),
                      fmt::format("the device pool holds {} bytes of its {}-byte limit", reserved_, limit_));
  if (size > ctx_.props.limits.maxStorageBufferRange && dedicated)
    throw OutOfMemory(std::string(op), ctx_.device, size_t(want),
                      fmt::format("a tensor may not exceed maxStorageBufferRange ({} bytes) on this device",
                                  ctx_.props.limits.maxStorageBufferRange));
  auto block = std::make_unique<Block>();
  block->size = size;
  block->dedicated = dedicated;
  auto bi = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  bi.size = size;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vk.vkCreateBuffer(ctx_.dev, &bi, nullptr, &block->buffer);
  if (r != VK_SUCCESS)
    throw OutOfMemory(std::string(op), ctx_.device, size_t(want), fmt::format("vkCreateBuffer: {}", result_name(r)));
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(ctx_.dev, block->buffer, &req);
  auto ai = vk_struct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type_;
  r = vk.vkAllocateMemory(ctx_.dev, &ai, nullptr, &block->memory);
  if (r != VK_SUCCESS) {
    vk.vkDestroyBuffer(ctx_.dev, block->buffer, nullptr);
    throw OutOfMemory(std::string(op), ctx_.device, size_t(want), fmt::format("vkAllocateMemory: {}", result_name(r)));
  }
  ++ctx_.stats.device_allocations;
  vk.vkBindBufferMemory(ctx_.dev, block->buffer, block->memory, 0);
  if (host_visible_) {
    void* p = nullptr;
    r = vk.vkMapMemory(ctx_.dev, block->memory, 0, VK_WHOLE_SIZE, 0, &p);
    if (r != VK_SUCCESS) {
      vk.vkDestroyBuffer(ctx_.dev, block->buffer, nullptr);
      vk.vkFreeMemory(ctx_.dev, block->memory, nullptr);
      throw OutOfMemory(std::string(op), ctx_.device, size_t(want), fmt::format("vkMapMemory: {}", result_name(r)));
    }
    block->mapped = static_cast<char*>(p);
  }
  reserved_ += size;
  ctx_.stats.bytes_reserved = reserved_;
  blocks_.push_back(std::move(block));
  return blocks_.back().get();
}

Chunk Pool::allocate(VkDeviceSize bytes, std::string_view op) {
  const VkDeviceSize cls = size_class(std::max<VkDeviceSize>(bytes, 4));
  auto it = free_.find(cls);
  if (it != free_.end() && !it->second.empty()) {
    Chunk c = it->second.back();
    it->second.pop_back();
    ++ctx_.stats.chunks_reused;
    ++ctx_.stats.chunks_live;
    return c;
  }
  Chunk c;
  if (cls > kDedicated) {
    c = {new_block(cls, true, op, bytes), 0, cls};
  } else {
    if (current_ == nullptr || current_->bump + cls > current_->size) {
      VkDeviceSize size = std::max(next_block_, cls);
      current_ = new_block(size, false, op, bytes);
      next_block_ = std::min(next_block_ * 2, kMaxBlock);
    }
    c = {current_, current_->bump, cls};
    current_->bump += cls;
  }
  ++ctx_.stats.chunks_live;
  return c;
}

void Pool::free(const Chunk& c) {
  --ctx_.stats.chunks_live;
  free_[c.size].push_back(c);
}

// Note [Idle before exit]
// crossfire never destroys its backends (the registry lives as long as the process), so a process can exit with
// Vulkan work submitted and not waited for. lavapipe runs a submission on its own queue thread, JIT-compiling
// shader variants as it goes, while exit() runs the static destructors of the libraries under it (LLVM's, the
// validation layer's): seen as a SIGSEGV in llvm::RuntimeDyldELF::registerEHFrames on lavapipe's queue thread after
// every test of the process had passed (the properties harness, RapidCheck seed 2373511941085924274, on a Zen 3 VM).
// Two things keep it from happening:
// - lavapipe JIT-compiles a pipeline's shader on its queue thread when the pipeline's first dispatch runs, and the
//   compile builds LLVM's function-local statics, whose destructors exit() then runs first, even while the compile
//   goes on. So a new pipeline's first dispatch is submitted and waited for at once (Context::dispatch): every
//   compile ends before the crossfire call that caused it returns. (Once per pipeline: a few hundred per process,
//   against the compile's milliseconds.)
// - An exit handler waits for each open device of each live backend to go idle, so that what is left in flight
//   runs out before the driver's own destructors. exit() runs handlers in the reverse order of their registration,
//   so it is registered when the first device opens (after the driver was loaded) and again after each batch that
//   ran a new pipeline completes (Context::retire_completed), after what that compile registered. (Running it
//   twice is harmless.) A device whose mutex another thread holds at exit is left alone: its queue is not ours.
namespace {
std::mutex& live_backends_mu() {
  static auto* m = new std::mutex;  // (never destroyed: the exit handler may run after static destructors began)
  return *m;
}
std::vector<VulkanBackend*>& live_backends() {
  static auto* v = new std::vector<VulkanBackend*>;
  return *v;
}
void idle_at_exit() {
  std::lock_guard l(live_backends_mu());
  for (VulkanBackend* b : live_backends()) b->wait_idle_at_exit();
}
void register_idle_at_exit() {
  if (std::atexit(idle_at_exit) != 0) fmt::print(stderr, "crossfire: vulkan: could not register the exit handler\n");
}
}  // namespace

// =====================================================================================================================
// Context
// =====================================================================================================================

Context::Context(VulkanBackend& b, int index, VkPhysicalDevice phys)
    : vk(b.vk), backend(b), device(Device::vulkan(index)), physical(phys) {
  vk.vkGetPhysicalDeviceProperties(physical, &props);
  vk.vkGetPhysicalDeviceMemoryProperties(physical, &mem_props);
  uint32_t nq = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(physical, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(physical, &nq, qf.data());
  bool found = false;
  for (uint32_t i = 0; i < nq && !found; ++i)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) queue_family = i, found = true;
  if (!found) throw BackendFailure("device", device, "the device has no compute queue");

  VkPhysicalDeviceFeatures avail{};
  vk.vkGetPhysicalDeviceFeatures(physical, &avail);
  VkPhysicalDeviceFeatures feats{};
  has_f64 = avail.shaderFloat64 == VK_TRUE;
  feats.shaderFloat64 = avail.shaderFloat64;
  float prio = 1.0f;
  auto qi = vk_struct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  qi.queueFamilyIndex = queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  auto di = vk_struct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.pEnabledFeatures = &feats;
  VkResult r = vk.vkCreateDevice(physical, &di, nullptr, &dev);
  if (r != VK_SUCCESS) throw BackendFailure("device", device, fmt::format("vkCreateDevice: {}", result_name(r)));
  vk.vkGetDeviceQueue(dev, queue_family, 0, &queue);

  // Memory types: which ones a storage buffer may live in.
  auto bi = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  bi.size = 4096;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer probe;
  r = vk.vkCreateBuffer(dev, &bi, nullptr, &probe);
  if (r != VK_SUCCESS) throw BackendFailure("device", device, fmt::format("vkCreateBuffer: {}", result_name(r)));
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(dev, probe, &req);
  vk.vkDestroyBuffer(dev, probe, nullptr);
  auto find_type = [&](VkMemoryPropertyFlags want) -> int {
    for (uint32_t i = 0; i < mem_props.memoryTypeCount; ++i)
      if ((req.memoryTypeBits & (1u << i)) && (mem_props.memoryTypes[i].propertyFlags & want) == want) return int(i);
    return -1;
  };
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const bool uma = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
                   props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  int device_type = -1;
  if (uma && !env_flag(kStagingEnv)) {
    device_type = find_type(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | host);
    unified = device_type >= 0;
  }
  if (device_type < 0) device_type = find_type(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (device_type < 0) device_type = find_type(0);
  int staging_type = find_type(host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (staging_type < 0) staging_type = find_type(host);
  if (device_type < 0 || (!unified && staging_type < 0))
    throw BackendFailure("device", device, "no usable memory type for storage buffers");
  VkDeviceSize limit = mem_props.memoryHeaps[mem_props.memoryTypes[device_type].heapIndex].size;
  if (const char* v = std::getenv(kMemoryLimitEnv)) {
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    if (end != v && *end == 0 && n > 0) limit = n;
  }
  pool_ = std::make_unique<Pool>(*this, uint32_t(device_type), unified, limit);
  if (!unified)
    staging_pool_ = std::make_unique<Pool>(
        *this, uint32_t(staging_type), true,
        mem_props.memoryHeaps[mem_props.memoryTypes[staging_type].heapIndex].size);

  if (const char* v = std::getenv(kSpecializedEnv); v != nullptr && std::strcmp(v, "0") == 0) use_specialized = false;

  // The on-disk pipeline cache (see kPipelineCacheEnv); any failure just means no cache.
  {
    std::string dir;
    const char* env = std::getenv(kPipelineCacheEnv);
    if (env && *env) dir = std::strcmp(env, "0") == 0 ? "" : env;
    else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = fmt::format("{}/crossfire", x);
    else if (const char* h = std::getenv("HOME"); h && *h) dir = fmt::format("{}/.cache/crossfire", h);
    std::vector<char> initial;
    if (!dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      std::string uuid;
      for (uint8_t b : props.pipelineCacheUUID) uuid += fmt::format("{:02x}", b);
      pipeline_cache_path_ = fmt::format("{}/vulkan-{:04x}-{:04x}-{}.bin", dir, props.vendorID, props.deviceID, uuid);
      if (FILE* f = std::fopen(pipeline_cache_path_.c_str(), "rb")) {
        char buf[65536];
        size_t got;
        while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) initial.insert(initial.end(), buf, buf + got);
        std::fclose(f);
      }
    }
    auto pc = vk_struct<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
    pc.initialDataSize = initial.size();
    pc.pInitialData = initial.empty() ? nullptr : initial.data();
    if (vk.vkCreatePipelineCache(dev, &pc, nullptr, &pipeline_cache_) != VK_SUCCESS) {
      pc.initialDataSize = 0;  // a stale or corrupt file: start empty
      pc.pInitialData = nullptr;
      if (vk.vkCreatePipelineCache(dev, &pc, nullptr, &pipeline_cache_) != VK_SUCCESS) pipeline_cache_ = VK_NULL_HANDLE;
    }
  }

  auto ci = vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  ci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  ci.queueFamilyIndex = queue_family;
  r = vk.vkCreateCommandPool(dev, &ci, nullptr, &cmd_pool_);
  if (r != VK_SUCCESS) throw BackendFailure("device", device, fmt::format("vkCreateCommandPool: {}", result_name(r)));

  // One layout for every shader: four storage buffers (binding 0 is the output) and a 128-byte push block.
  VkDescriptorSetLayoutBinding binds[kBindings];
  for (uint32_t i = 0; i < kBindings; ++i)
    binds[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  auto li = vk_struct<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  li.bindingCount = kBindings;
  li.pBindings = binds;
  r = vk.vkCreateDescriptorSetLayout(dev, &li, nullptr, &set_layout_);
  if (r != VK_SUCCESS) throw BackendFailure("device", device, fmt::format("vkCreateDescriptorSetLayout: {}", result_name(r)));
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
  auto pi = vk_struct<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  pi.setLayoutCount = 1;
  pi.pSetLayouts = &set_layout_;
  pi.pushConstantRangeCount = 1;
  pi.pPushConstantRanges = &range;
  r = vk.vkCreatePipelineLayout(dev, &pi, nullptr, &pipeline_layout_);
  if (r != VK_SUCCESS) throw BackendFailure("device", device, fmt::format("vkCreatePipelineLayout: {}", result_name(r)));
}

Context::~Context() {
  if (!dev) return;
  vk.vkDeviceWaitIdle(dev);
  auto drop = [&](std::unique_ptr<Batch>& b) {
    if (!b) return;
    for (VkDescriptorPool p : b->pools) vk.vkDestroyDescriptorPool(dev, p, nullptr);
    if (b->fence) vk.vkDestroyFence(dev, b->fence, nullptr);
  };
  drop(current_);
  for (auto& b : in_flight_) drop(b);
  for (auto& b : spare_) drop(b);
  for (auto& [k, p] : pipelines_) vk.vkDestroyPipeline(dev, p, nullptr);
  for (auto& [k, m] : modules_) vk.vkDestroyShaderModule(dev, m, nullptr);
  if (pipeline_cache_) vk.vkDestroyPipelineCache(dev, pipeline_cache_, nullptr);
  pool_.reset();
  staging_pool_.reset();
  vk.vkDestroyPipelineLayout(dev, pipeline_layout_, nullptr);
  vk.vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
  vk.vkDestroyCommandPool(dev, cmd_pool_, nullptr);
  vk.vkDestroyDevice(dev, nullptr);
}

void Context::check_lost(std::string_view op) const {
  if (lost_) throw BackendFailure(std::string(op), device, "the Vulkan device was lost earlier (VK_ERROR_DEVICE_LOST)");
}

void Context::fail(std::string_view op, std::string_view what, VkResult r) {
  if (r == VK_ERROR_DEVICE_LOST) lost_ = true;
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    throw OutOfMemory(std::string(op), device, 0, fmt::format("{}: {}", what, result_name(r)));
  throw BackendFailure(std::string(op), device, fmt::format("{}: {}", what, result_name(r)));
}

// ---- memory ---------------------------------------------------------------------------------------------------------

void Context::release_chunk(Allocation* a) {
  if (a->last_use > completed_) retire_completed(false, "release");
  if (a->last_use > completed_) {
    ++stats.deferred_frees;
    if (current_ && current_->serial == a->last_use) {
      current_->deferred.push_back(a->chunk);
      return;
    }
    for (auto& b : in_flight_)
      if (b->serial == a->last_use) {
        b->deferred.push_back(a->chunk);
        return;
      }
  }
  pool_->free(a->chunk);
}

void Context::write(Allocation& a, const void* src, size_t n) {
  check_lost("from_data");
  if (unified) {
    wait_serial(a.last_use, "from_data");
    std::memcpy(a.chunk.block->mapped + a.chunk.offset, src, n);
    return;
  }
  Chunk s = staging_pool_->allocate(n, "from_data");
  std::memcpy(s.block->mapped + s.offset, src, n);
  Batch& b = recording("from_data");
  b.staging.push_back(s);
  Allocation* bufs[] = {&a};
  barrier_if_needed(b, bufs);
  VkBufferCopy region{s.offset, a.chunk.offset, n};
  vk.vkCmdCopyBuffer(b.cmd, s.block->buffer, a.chunk.block->buffer, 1, &region);
  use(a, true);
  if (++b.commands >= kBatchDispatches) flush("from_data");
}

void Context::read(Allocation& a, void* dst, size_t n, std::string_view op) {
  check_lost(op);
  if (unified) {
    wait_serial(a.last_write, op);
    std::memcpy(dst, a.chunk.block->mapped + a.chunk.offset, n);
    return;
  }
  Chunk s = staging_pool_->allocate(n, op);
  Batch& b = recording(op);
  Allocation* bufs[] = {&a};
  barrier_if_needed(b, bufs);
  VkBufferCopy region{a.chunk.offset, s.offset, n};
  vk.vkCmdCopyBuffer(b.cmd, a.chunk.block->buffer, s.block->buffer, 1, &region);
  use(a, false);
  const uint64_t serial = b.serial;
  try {
    wait_serial(serial, op);
  } catch (...) {
    staging_pool_->free(s);
    throw;
  }
  std::memcpy(dst, s.block->mapped + s.offset, n);
  staging_pool_->free(s);
}

void Context::copy(Allocation& src, Allocation& dst, size_t n) {
  check_lost("to");
  Batch& b = recording("to");
  Allocation* bufs[] = {&dst, &src};
  barrier_if_needed(b, bufs);
  VkBufferCopy region{src.chunk.offset, dst.chunk.offset, n};
  vk.vkCmdCopyBuffer(b.cmd, src.chunk.block->buffer, dst.chunk.block->buffer, 1, &region);
  use(src, false);
  use(dst, true);
  if (++b.commands >= kBatchDispatches) flush("to");
}

void Context::fill(Allocation& dst, uint32_t pattern, std::string_view op) {
  check_lost(op);
  Batch& b = recording(op);
  Allocation* bufs[] = {&dst};
  barrier_if_needed(b, bufs);
  vk.vkCmdFillBuffer(b.cmd, dst.chunk.block->buffer, dst.chunk.offset, dst.range, pattern);
  use(dst, true);
  if (++b.commands >= kBatchDispatches) flush(op);
}

// ---- pipelines --------------------------------------------------------------------------------------------------------

// Note [Specialized SPIR-V]
// lavapipe lowers a module's whole code before the specialization constants let it drop what a pipeline does not
// use, and an elementwise module holds its op for every dtype (f32, i32, bool, the two halves, i64 as two words):
// ~50 KB of SPIR-V, 10-20 ms to create each pipeline, of which a 10 s campaign on cpu:0, cpu:1 and vulkan:0 creates
// ~140 (2.3-2.9 s of its 10, docs/benchmarks.md); reduce's, with four ops for four dtypes and both row strategies,
// took ~10 ms each. So the build also writes, for each pipeline with specialization constants that the kernels can
// create (for_each_pipeline_spec in pipeline_specs.hpp, from the op table), its module with the constants set,
// frozen and folded and the code they rule out removed (spirv-opt; kernels/vulkan/specialize_spirv.cmake), named
// `<module>-<c0>_<c1>_...`: an elementwise one is 3-9 KB, ~2-5 ms a pipeline. A pipeline with no such module (a
// build without spirv-opt) is created from the generic module and its constants, as before, and counted in
// Context::generic_pipelines; the two give the same kernel (the VulkanSpecialized tests hold them to each other bit
// for bit and the count to zero, and the tests run under the validation layers, which check each module as it is
// created).
std::string_view specialized_name(std::string_view module, std::span<const int32_t> spec, std::string& buf) {
  buf.assign(module);
  for (size_t i = 0; i < spec.size(); ++i) fmt::format_to(std::back_inserter(buf), "{}{}", i == 0 ? '-' : '_', spec[i]);
  return buf;
}

VkShaderModule Context::shader_module(std::string_view name, std::span<const uint32_t> code, std::string_view op) {
  if (auto it = modules_.find(std::string(name)); it != modules_.end()) return it->second;
  auto mi = vk_struct<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  mi.codeSize = code.size_bytes();
  mi.pCode = code.data();
  VkShaderModule sm;
  VkResult r = vk.vkCreateShaderModule(dev, &mi, nullptr, &sm);
  if (r != VK_SUCCESS) fail(op, fmt::format("vkCreateShaderModule `{}`", name), r);
  modules_.emplace(std::string(name), sm);
  return sm;
}

VkPipeline Context::pipeline(std::string_view module, std::span<const int32_t> spec, std::string_view op) {
  uint64_t key = fnv1a(1469598103934665603ull, module.data(), module.size());
  key = fnv1a(key, spec.data(), spec.size_bytes());
  key = fnv1a(key, &use_specialized, sizeof use_specialized);
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
  check_lost(op);
  if (fail_next_pipeline) {
    fail_next_pipeline = false;
    throw BackendFailure(std::string(op), device,
                         fmt::format("vkCreateComputePipelines for shader `{}`: VK_ERROR_UNKNOWN (injected by a test)",
                                     module));
  }
  // The specialized module when the build has one (Note [Specialized SPIR-V]), else the generic one.
  std::string buf;
  std::span<const uint32_t> specialized;
  if (use_specialized && !spec.empty()) specialized = embedded_spirv(specialized_name(module, spec, buf));
  VkShaderModule sm;
  if (!specialized.empty()) {
    sm = shader_module(buf, specialized, op);
  } else {
    std::span<const uint32_t> code = embedded_spirv(module);
    if (code.empty())
      throw BackendFailure(std::string(op), device, fmt::format("no embedded SPIR-V module `{}`", module));
    sm = shader_module(module, code, op);
    if (use_specialized && !spec.empty()) ++generic_pipelines;
  }
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (size_t i = 0; i < spec.size(); ++i) entries[i] = {uint32_t(i), uint32_t(i * 4), 4};
  VkSpecializationInfo si{uint32_t(entries.size()), entries.data(), spec.size_bytes(), spec.data()};
  auto ci = vk_struct<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  ci.stage = vk_struct<VkPipelineShaderStageCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = sm;
  ci.stage.pName = "main";
  // (A specialized module has no specialization constants left to set.)
  ci.stage.pSpecializationInfo = spec.empty() || !specialized.empty() ? nullptr : &si;
  ci.layout = pipeline_layout_;
  VkPipeline p;
  VkResult r = vk.vkCreateComputePipelines(dev, pipeline_cache_, 1, &ci, nullptr, &p);
  if (r != VK_SUCCESS) fail(op, fmt::format("vkCreateComputePipelines for shader `{}`", module), r);
  pipelines_.emplace(key, p);
  await_new_pipeline_ = true;
  save_pipeline_cache();
  return p;
}

void Context::save_pipeline_cache() {
  if (!pipeline_cache_ || pipeline_cache_path_.empty()) return;
  size_t n = 0;
  if (vk.vkGetPipelineCacheData(dev, pipeline_cache_, &n, nullptr) != VK_SUCCESS || n == 0) return;
  std::vector<char> data(n);
  if (vk.vkGetPipelineCacheData(dev, pipeline_cache_, &n, data.data()) != VK_SUCCESS) return;
  // Write-then-rename, so concurrent test processes never see a torn file.
  std::string tmp = fmt::format("{}.{}.tmp", pipeline_cache_path_, ::getpid());
  if (FILE* f = std::fopen(tmp.c_str(), "wb")) {
    bool ok = std::fwrite(data.data(), 1, n, f) == n;
    ok &= std::fclose(f) == 0;
    if (ok) std::rename(tmp.c_str(), pipeline_cache_path_.c_str());
    else std::remove(tmp.c_str());
  }
}

// ---- batches ----------------------------------------------------------------------------------------------------------

Context::Batch& Context::recording(std::string_view op) {
  if (current_) return *current_;
  check_lost(op);
  std::unique_ptr<Batch> b;
  if (!spare_.empty()) {
    b = std::move(spare_.back());
    spare_.pop_back();
  } else {
    b = std::make_unique<Batch>();
    auto ai = vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    ai.commandPool = cmd_pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkResult r = vk.vkAllocateCommandBuffers(dev, &ai, &b->cmd);
    if (r != VK_SUCCESS) fail(op, "vkAllocateCommandBuffers", r);
    auto fi = vk_struct<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    r = vk.vkCreateFence(dev, &fi, nullptr, &b->fence);
    if (r != VK_SUCCESS) {
      vk.vkFreeCommandBuffers(dev, cmd_pool_, 1, &b->cmd);
      fail(op, "vkCreateFence", r);
    }
  }
  auto bi = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VkResult r = vk.vkBeginCommandBuffer(b->cmd, &bi);
  if (r != VK_SUCCESS) {
    spare_.push_back(std::move(b));
    fail(op, "vkBeginCommandBuffer", r);
  }
  b->serial = serial_;
  b->commands = 0;
  // Earlier batches on this queue may have written what this one reads: one barrier orders them.
  auto mb = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vk.vkCmdPipelineBarrier(b->cmd, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
  ++epoch_;
  current_ = std::move(b);
  return *current_;
}

void Context::barrier_if_needed(Batch& b, std::span<Allocation* const> bufs) {
  bool needed = false;
  for (Allocation* a : bufs) needed |= a != nullptr && a->barrier_epoch == epoch_ && a->last_write == b.serial;
  if (!needed) return;
  auto mb = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vk.vkCmdPipelineBarrier(b.cmd, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
  ++epoch_;
  ++stats.barriers;
}

void Context::use(Allocation& a, bool write) {
  a.last_use = serial_;
  if (write) {
    a.last_write = serial_;
    a.barrier_epoch = epoch_;
  }
}

VkDescriptorSet Context::descriptor_set(Batch& b, std::string_view op) {
  if (b.pools.empty() || b.sets_in_pool == kSetsPerPool) {
    if (!b.pools.empty()) ++b.pool_index;
    if (b.pool_index >= b.pools.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kBindings};
      auto pi = vk_struct<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
      pi.maxSets = kSetsPerPool;
      pi.poolSizeCount = 1;
      pi.pPoolSizes = &size;
      VkDescriptorPool pool;
      VkResult r = vk.vkCreateDescriptorPool(dev, &pi, nullptr, &pool);
      if (r != VK_SUCCESS) fail(op, "vkCreateDescriptorPool", r);
      b.pools.push_back(pool);
      b.pool_index = b.pools.size() - 1;
    }
    b.sets_in_pool = 0;
  }
  auto ai = vk_struct<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  ai.descriptorPool = b.pools[b.pool_index];
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &set_layout_;
  VkDescriptorSet set;
  VkResult r = vk.vkAllocateDescriptorSets(dev, &ai, &set);
  if (r != VK_SUCCESS) fail(op, "vkAllocateDescriptorSets", r);
  ++b.sets_in_pool;
  return set;
}

void Context::dispatch(VkPipeline p, std::span<Allocation* const> bufs, const void* push, size_t push_size,
                       uint32_t gx, uint32_t gy, uint32_t gz, std::string_view op) {
  check_lost(op);
  Batch& b = recording(op);
  barrier_if_needed(b, bufs);
  VkDescriptorSet set = descriptor_set(b, op);
  VkDescriptorBufferInfo infos[kBindings];
  VkWriteDescriptorSet writes[kBindings];
  for (uint32_t i = 0; i < kBindings; ++i) {
    const Allocation* a = i < bufs.size() && bufs[i] ? bufs[i] : bufs[0];
    infos[i] = {a->chunk.block->buffer, a->chunk.offset, a->range};
    writes[i] = vk_struct<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vk.vkUpdateDescriptorSets(dev, kBindings, writes, 0, nullptr);
  vk.vkCmdBindPipeline(b.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  vk.vkCmdBindDescriptorSets(b.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_, 0, 1, &set, 0, nullptr);
  alignas(8) uint8_t block[kPushBytes] = {};
  std::memcpy(block, push, std::min<size_t>(push_size, kPushBytes));
  vk.vkCmdPushConstants(b.cmd, pipeline_layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes, block);
  vk.vkCmdDispatch(b.cmd, gx, gy, gz);
  for (size_t i = 1; i < bufs.size(); ++i)
    if (bufs[i]) use(*bufs[i], false);
  use(*bufs[0], true);
  if (await_new_pipeline_) {  // its first dispatch: wait while lavapipe compiles it (Note [Idle before exit])
    await_new_pipeline_ = false;
    b.ran_new_pipeline = true;
    synchronize(op);
  } else if (++b.commands >= kBatchDispatches) {
    flush(op);
  }
}

void Context::flush(std::string_view op) {
  if (!current_) return;
  Batch& b = *current_;
  // Make this batch's writes visible to host reads once its fence signals.
  auto mb = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vk.vkCmdPipelineBarrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                          VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  VkResult r = vk.vkEndCommandBuffer(b.cmd);
  if (r != VK_SUCCESS) fail(op, "vkEndCommandBuffer", r);
  r = vk.vkResetFences(dev, 1, &b.fence);
  if (r != VK_SUCCESS) fail(op, "vkResetFences", r);
  auto si = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
  si.commandBufferCount = 1;
  si.pCommandBuffers = &b.cmd;
  r = vk.vkQueueSubmit(queue, 1, &si, b.fence);
  if (r != VK_SUCCESS) fail(op, "vkQueueSubmit", r);
  ++stats.batches_submitted;
  in_flight_.push_back(std::move(current_));
  ++serial_;
  retire_completed(in_flight_.size() > kMaxInFlight, op);
}

void Context::recycle(Batch& b) {
  for (const Chunk& c : b.deferred) pool_->free(c);
  b.deferred.clear();
  b.ran_new_pipeline = false;
  for (const Chunk& c : b.staging) staging_pool_->free(c);
  b.staging.clear();
  for (VkDescriptorPool p : b.pools) vk.vkResetDescriptorPool(dev, p, 0);
  b.pool_index = 0;
  b.sets_in_pool = 0;
  vk.vkResetCommandBuffer(b.cmd, 0);
}

void Context::retire_completed(bool block_on_oldest, std::string_view op) {
  while (!in_flight_.empty()) {
    Batch& b = *in_flight_.front();
    VkResult r;
    if (block_on_oldest) {
      r = vk.vkWaitForFences(dev, 1, &b.fence, VK_TRUE, kFenceTimeoutNs);
      block_on_oldest = false;
    } else {
      r = vk.vkGetFenceStatus(dev, b.fence);
    }
    if (r == VK_NOT_READY) break;
    if (r == VK_TIMEOUT) fail(op, "waiting for a batch (timed out after 120 s)", r);
    if (r != VK_SUCCESS) fail(op, "waiting for a batch", r);
    completed_ = b.serial;
    if (b.ran_new_pipeline) register_idle_at_exit();  // after what its JIT compile registered (Note [Idle ...])
    recycle(b);
    spare_.push_back(std::move(in_flight_.front()));
    in_flight_.pop_front();
  }
}

void Context::wait_serial(uint64_t serial, std::string_view op) {
  if (serial <= completed_) return;
  if (current_ && serial >= current_->serial) flush(op);
  while (completed_ < serial && !in_flight_.empty()) retire_completed(true, op);
}

void Context::synchronize(std::string_view op) {
  flush(op);
  while (!in_flight_.empty()) retire_completed(true, op);
}

// =====================================================================================================================
// VulkanBackend
// =====================================================================================================================

VKAPI_ATTR VkBool32 VKAPI_CALL VulkanBackend::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                         VkDebugUtilsMessageTypeFlagsEXT,
                                                         const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                         void* self) {
  auto* b = static_cast<VulkanBackend*>(self);
  const char* level = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT     ? "error"
                      : severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT ? "warning"
                                                                                    : "info";
  std::string msg = fmt::format("vulkan validation {}: {}", level, data && data->pMessage ? data->pMessage : "?");
  b->validation_count_.fetch_add(1);
  fmt::print(stderr, "crossfire: {}\n", msg);
  std::lock_guard l(b->log_mu_);
  b->log_.push_back(std::move(msg));
  return VK_FALSE;
}

namespace {
// With validation on, a process that saw any validation message exits non-zero, so that every test binary (not
// only the Vulkan tests, which also assert the count) fails loudly under CROSSFIRE_VULKAN_VALIDATION=1.
std::atomic<VulkanBackend*> g_validated{nullptr};
void report_validation_at_exit() {
  VulkanBackend* b = g_validated.load();
  if (b == nullptr || b->validation_messages() == 0) return;
  fmt::print(stderr, "crossfire: FAIL: the Vulkan validation layer reported {} message(s) in this process\n",
             b->validation_messages());
  std::fflush(stderr);
  std::_Exit(3);
}
}  // namespace

VulkanBackend::VulkanBackend() {
  register_kernels(*this);
  // f16 and bf16 tensors too: stored two to a word and converted with integer operations in the shaders, so any
  // Vulkan device computes them (Note [Halves as f32 inside a shader] in shaders/common.glsl); the kernels that
  // have f32 shaders only run them on widened copies (Note [Halves through the f32 kernels] in vulkan_kernels.cpp).
  // i64 too, as two 32-bit words computed with 32-bit integer operations (Note [i64 as two words] in
  // shaders/common.glsl): no shaderInt64 needed, so again any device.
  set_dtypes(kAnyDType);
}

void VulkanBackend::discover() {
  std::string why;
  if (!vk.open(&why)) {
    reason_ = why;
    return;
  }
  validation_ = env_flag(kValidationEnv);
  // Note [lavapipe without its thread pool]
  // llvmpipe (under lavapipe) hands every compute dispatch to a pool of worker threads, one per core, and waits for
  // them: two cross-thread wake-ups per dispatch, which on a VM cost more than a small kernel itself (a batched
  // 1-element add: ~26 us of lavapipe's time with the pool, ~4 us without; docs/benchmarks.md, "lavapipe's thread
  // pool"). crossfire's kernels are mostly small and a campaign runs one worker per core already, so unless the
  // user chose otherwise, llvmpipe is told to run dispatches on its queue thread (LP_NUM_THREADS=0, which llvmpipe
  // reads when it creates its screen, during instance and device enumeration below). It applies to llvmpipe alone;
  // set LP_NUM_THREADS=N to give it N threads again. (setenv is not safe against a concurrent getenv; discovery runs
  // once, under init()'s call_once, at the process's first use of Vulkan, normally before it starts threads.)
  if (std::getenv(kLavapipeThreadsEnv) == nullptr) ::setenv(kLavapipeThreadsEnv, "0", 0);
  std::vector<const char*> layers, extensions;
  if (validation_) {
    uint32_t n = 0;
    vk.vkEnumerateInstanceLayerProperties(&n, nullptr);
    std::vector<VkLayerProperties> lp(n);
    vk.vkEnumerateInstanceLayerProperties(&n, lp.data());
    bool have = std::any_of(lp.begin(), lp.end(), [](const VkLayerProperties& p) {
      return std::strcmp(p.layerName, "VK_LAYER_KHRONOS_validation") == 0;
    });
    if (!have) {
      reason_ = fmt::format("{}=1 asks for VK_LAYER_KHRONOS_validation, which is not installed", kValidationEnv);
      return;
    }
    layers.push_back("VK_LAYER_KHRONOS_validation");
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  auto app = vk_struct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "crossfire";
  app.pEngineName = "crossfire";
  app.apiVersion = VK_API_VERSION_1_1;
  auto mi = vk_struct<VkDebugUtilsMessengerCreateInfoEXT>(VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
  mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                   VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mi.pfnUserCallback = &VulkanBackend::on_message;
  mi.pUserData = this;
  auto ci = vk_struct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = uint32_t(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = uint32_t(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  if (validation_) ci.pNext = &mi;
  VkResult r = vk.vkCreateInstance(&ci, nullptr, &instance);
  if (r != VK_SUCCESS) {
    reason_ = r == VK_ERROR_INCOMPATIBLE_DRIVER
                  ? "no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER)"
                  : fmt::format("vkCreateInstance failed: {}", result_name(r));
    instance = VK_NULL_HANDLE;
    return;
  }
  if (!vk.load_instance(instance, &why)) {
    reason_ = why;
    return;
  }
  if (validation_ && vk.vkCreateDebugUtilsMessengerEXT) {
    vk.vkCreateDebugUtilsMessengerEXT(instance, &mi, nullptr, &messenger_);
    if (g_validated.exchange(this) == nullptr) std::atexit(report_validation_at_exit);
  }

  uint32_t n = 0;
  r = vk.vkEnumeratePhysicalDevices(instance, &n, nullptr);
  if (r != VK_SUCCESS) {
    reason_ = fmt::format("vkEnumeratePhysicalDevices failed: {}", result_name(r));
    return;
  }
  std::vector<VkPhysicalDevice> all(n);
  vk.vkEnumeratePhysicalDevices(instance, &n, all.data());
  all.resize(n);
  std::vector<std::string> skipped;
  for (VkPhysicalDevice p : all) {
    VkPhysicalDeviceProperties props;
    vk.vkGetPhysicalDeviceProperties(p, &props);
    if (props.apiVersion < VK_API_VERSION_1_1) {
      skipped.push_back(fmt::format("{} supports only Vulkan {}.{}", props.deviceName,
                                    VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion)));
      continue;
    }
    if (physical_.size() == 255) break;
    DeviceInfo info;
    info.device = Device::vulkan(int(physical_.size()));
    info.name = props.deviceName;
    info.type = device_type_name(props.deviceType);
    info.driver = fmt::format("driver version {:#x}, Vulkan {}.{}.{}", props.driverVersion,
                              VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion),
                              VK_API_VERSION_PATCH(props.apiVersion));
    if (props.apiVersion >= VK_API_VERSION_1_2) {
      auto dp = vk_struct<VkPhysicalDeviceDriverProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
      auto p2 = vk_struct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
      p2.pNext = &dp;
      vk.vkGetPhysicalDeviceProperties2(p, &p2);
      info.driver = fmt::format("{} ({}), Vulkan {}.{}.{}", dp.driverName, dp.driverInfo,
                                VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion),
                                VK_API_VERSION_PATCH(props.apiVersion));
    }
    physical_.push_back(p);
    infos_.push_back(std::move(info));
  }
  contexts_.resize(physical_.size());
  if (physical_.empty()) {
    reason_ = all.empty() ? "no Vulkan physical device found"
                          : fmt::format("no Vulkan 1.1 device found ({})", fmt::join(skipped, "; "));
    return;
  }
}

void VulkanBackend::wait_idle_at_exit() {
  std::unique_lock cl(contexts_mu_, std::try_to_lock);
  if (!cl.owns_lock()) return;
  for (auto& c : contexts_) {
    if (!c || !c->dev) continue;
    std::unique_lock l(c->mu, std::try_to_lock);
    if (l.owns_lock()) vk.vkDeviceWaitIdle(c->dev);
  }
}

VulkanBackend::~VulkanBackend() {
  {
    std::lock_guard l(live_backends_mu());
    std::erase(live_backends(), this);
  }
  contexts_.clear();
  if (messenger_) vk.vkDestroyDebugUtilsMessengerEXT(instance, messenger_, nullptr);
  if (instance) vk.vkDestroyInstance(instance, nullptr);
}

DeviceInfo VulkanBackend::device_info(int index) const {
  init();
  if (index < 0 || index >= int(infos_.size())) return {};
  return infos_[size_t(index)];
}

Context& VulkanBackend::context(int index) {
  init();
  std::lock_guard l(contexts_mu_);
  auto& c = contexts_.at(size_t(index));
  if (!c) {
    c = std::make_unique<Context>(*this, index, physical_[size_t(index)]);
    if (!registered_at_exit_) {  // Note [Idle before exit]
      registered_at_exit_ = true;
      register_idle_at_exit();
      std::lock_guard ll(live_backends_mu());
      live_backends().push_back(this);
    }
  }
  return *c;
}

std::vector<std::string> VulkanBackend::validation_log() const {
  std::lock_guard l(log_mu_);
  return log_;
}

PoolStats VulkanBackend::pool_stats(int index) {
  Context& c = context(index);
  std::lock_guard l(c.mu);
  return c.stats;
}

void VulkanBackend::set_memory_limit(int index, uint64_t bytes) {
  Context& c = context(index);
  std::lock_guard l(c.mu);
  c.pool().set_limit(bytes);
}

TensorImpl* VulkanBackend::allocate(Device device, DType dtype, const Shape& shape, std::string_view op) {
  Context& c = context(device.index);
  auto* t = new VkTensor{TensorImpl(device, dtype, shape, this), {}};
  const size_t nbytes = t->impl.nbytes;
  try {
    std::lock_guard l(c.mu);
    c.check_lost(op);
    t->alloc.chunk = c.pool().allocate(std::max<size_t>(nbytes, 4), op);
  } catch (...) {
    delete t;
    throw;
  }
  t->alloc.range = round_up(std::max<size_t>(nbytes, 4), 4);
  TensorImpl& impl = t->impl;
  impl.backend_state = &t->alloc;
  BackendCounters::bump(counters_.allocations);
  BackendCounters::bump(counters_.bytes_allocated, nbytes);
  return &impl;
}

void VulkanBackend::release(TensorImpl* t) {
  BackendCounters::bump(counters_.releases);
  VkTensor* vt = tensor_of(t);
  try {
    Context& c = context(t->device.index);
    std::lock_guard l(c.mu);
    c.release_chunk(&vt->alloc);
  } catch (const std::exception& e) {
    // A lost device: the memory goes with it. release() must not throw (it runs in destructors).
    fmt::print(stderr, "crossfire: vulkan: releasing a tensor: {}\n", e.what());
  }
  delete vt;
}

void VulkanBackend::write(TensorImpl& t, const void* src) {
  if (t.nbytes == 0) return;
  Context& c = context(t.device.index);
  std::lock_guard l(c.mu);
  c.write(alloc_of(t), src, t.nbytes);
}

void VulkanBackend::read(const TensorImpl& t, void* dst) {
  if (t.nbytes == 0) return;
  Context& c = context(t.device.index);
  std::lock_guard l(c.mu);
  c.read(alloc_of(t), dst, t.nbytes, "to_host");
}

void VulkanBackend::copy(const TensorImpl& src, TensorImpl& dst) {
  if (src.nbytes == 0) return;
  if (src.device.index != dst.device.index) {
    std::vector<uint8_t> staging(src.nbytes);
    read(src, staging.data());
    write(dst, staging.data());
    return;
  }
  Context& c = context(src.device.index);
  std::lock_guard l(c.mu);
  c.copy(alloc_of(src), alloc_of(dst), src.nbytes);
}

void VulkanBackend::synchronize() {
  for (size_t i = 0; i < contexts_.size(); ++i) {
    Context* c;
    {
      std::lock_guard l(contexts_mu_);
      c = contexts_[i].get();
    }
    if (!c) continue;
    std::lock_guard l(c->mu);
    c->synchronize("synchronize");
  }
}

}  // namespace crossfire::vulkan

namespace crossfire {
std::unique_ptr<Backend> make_vulkan_backend() { return std::make_unique<vulkan::VulkanBackend>(); }
}  // namespace crossfire
