// The counting CPU allocator (tensor_memory.h). Each block keeps the pointer the wrapped
// allocator returned, both as data and as context, so that LibTorch's raw_allocate /
// raw_deallocate (which need data == context) keep working; the size of each live block is
// kept in a map under a mutex (a training step allocates a few thousand blocks).
#include "engine/tensor_memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace engine {
namespace {

class CountingCpuAllocator final : public c10::Allocator {
  public:
    explicit CountingCpuAllocator(c10::Allocator* wrapped)
        : wrapped_(wrapped), wrapped_deleter_(wrapped->raw_deleter()) {
        if (wrapped_deleter_ == nullptr)
            throw std::runtime_error(
                "tensor memory: LibTorch's CPU allocator has no raw deleter; cannot count");
    }

    // LibTorch 1.13 declares allocate() const, 2.3 and later non-const: both are defined, and
    // whichever the installed c10::Allocator declares virtual is the one overridden.
    c10::DataPtr allocate(size_t n) const { return do_allocate(n); }
    c10::DataPtr allocate(size_t n) { return do_allocate(n); }
    // Pure virtual from LibTorch 2.3 on; a plain member before.
    void copy_data(void* dest, const void* src, std::size_t count) const {
        if (count > 0) std::memcpy(dest, src, count);
    }
    c10::DeleterFnPtr raw_deleter() const override { return &counted_delete; }

    int64_t live() const { return live_.load(); }
    int64_t peak() const { return peak_.load(); }
    void reset_peak() { peak_.store(live_.load()); }

  private:
    c10::DataPtr do_allocate(size_t n) const {
        c10::DataPtr inner = wrapped_->allocate(n);
        void* data = inner.get();
        const c10::Device device = inner.device();
        if (data == nullptr) return inner;  // zero-size: nothing to count
        if (inner.get_context() != data)
            throw std::runtime_error(
                "tensor memory: LibTorch's CPU allocator returned a block whose context is not "
                "its data pointer; cannot count");
        // Ownership leaves the DataPtr: counted_delete frees the block through the raw deleter.
        void* released = inner.release_context();
        (void)released;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            sizes_[data] = n;
        }
        const int64_t now = live_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
        int64_t seen = peak_.load();
        while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
        }
        return {data, data, &counted_delete, device};
    }

    static void counted_delete(void* data);

    c10::Allocator* wrapped_;
    c10::DeleterFnPtr wrapped_deleter_;
    mutable std::mutex mutex_;
    mutable std::unordered_map<void*, size_t> sizes_;
    mutable std::atomic<int64_t> live_{0}, peak_{0};
};

CountingCpuAllocator* g_counting_allocator = nullptr;
std::once_flag g_counting_once;

void CountingCpuAllocator::counted_delete(void* data) {
    CountingCpuAllocator* self = g_counting_allocator;
    size_t n = 0;
    {
        std::lock_guard<std::mutex> lock(self->mutex_);
        auto it = self->sizes_.find(data);
        if (it != self->sizes_.end()) {
            n = it->second;
            self->sizes_.erase(it);
        }
    }
    self->live_.fetch_sub(static_cast<int64_t>(n));
    self->wrapped_deleter_(data);
}

}  // namespace

void track_tensor_memory() {
    std::call_once(g_counting_once, [] {
        // Never freed: tensors still alive at exit hold its deleter.
        g_counting_allocator = new CountingCpuAllocator(c10::GetCPUAllocator());
        // The highest priority, so that nothing registered later replaces it unnoticed.
        c10::SetCPUAllocator(g_counting_allocator, 255);
    });
}

int64_t live_tensor_bytes() { return g_counting_allocator ? g_counting_allocator->live() : 0; }

int64_t peak_tensor_bytes() { return g_counting_allocator ? g_counting_allocator->peak() : 0; }

void reset_peak_tensor_bytes() {
    if (g_counting_allocator) g_counting_allocator->reset_peak();
}

}  // namespace engine
