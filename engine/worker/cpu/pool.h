// The compute threads of our decode kernels: the caller and (threads - 1) helpers that wait for work by spinning
// with sched_yield for a short while, then sleep.
//
// A decode step makes about 150 parallel calls (four linears and one attention a layer, the lm_head), each a few
// tens of microseconds. OpenMP's threads either spin (fast alone; on a busy 2-core machine a spinning thread
// holds the core the other process needs, and a 20 ms step took 53-270 ms, measured here) or sleep (robust, but
// each wake-up costs tens of microseconds: the step took 33 ms instead of 21). These helpers spin between calls,
// yielding the core at every 16th turn, so a call starts in about a microsecond when the machine is quiet and another
// process runs when it is not; after SPIN_NS without work (between steps of a quiet server) they sleep.
//
// What it does not do: nest (a call made while another thread holds the pool runs on the calling thread alone),
// survive fork (a child process runs every call on its calling thread), or change its size after its first use
// (torch's thread count then).
#pragma once
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lanes {

class SpinPool {
 public:
  using Task = std::function<void(int64_t, int64_t)>;

  static SpinPool& get() {
    static SpinPool* pool = new SpinPool(at::get_num_threads());  // never destroyed: helpers outlive exit safely
    return *pool;
  }

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }

  // fn(begin, end) over [0, n) in chunks of `grain`, taken in order by whichever thread is free (the caller too).
  void run(int64_t n, int64_t grain, const Task& fn) {
    grain = std::max<int64_t>(grain, 1);
    if (n <= grain || helpers_.empty() || getpid() != pid_) return fn(0, n);
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return fn(0, n);  // another thread's call holds the helpers
    job_ = &fn, n_ = n, grain_ = grain;
    next_.store(0);
    pending_.store(static_cast<int>(helpers_.size()));
    epoch_.fetch_add(1);
    if (sleeping_.load() > 0) {
      std::lock_guard<std::mutex> lock(sleep_);
      cv_.notify_all();
    }
    work();
    for (int spins = 0; pending_.load(std::memory_order_acquire) > 0; ++spins) pause(spins);
  }

 private:
  static constexpr int64_t SPIN_NS = 2'000'000;  // 2 ms of waiting for work, then sleep

  explicit SpinPool(int threads) : pid_(getpid()) {
    for (int i = 1; i < threads; ++i) helpers_.emplace_back([this] { helper(); });
    for (auto& t : helpers_) t.detach();
  }

  static void pause(int spins) {
    if (spins % 16 == 15) sched_yield();
    else _mm_pause();
  }

  void work() {
    for (int64_t c; (c = next_.fetch_add(1)) * grain_ < n_;) (*job_)(c * grain_, std::min(n_, (c + 1) * grain_));
  }

  void helper() {
    uint64_t seen = 0;  // the epoch at construction (a run before this thread starts still counts)
    for (;;) {
      auto start = std::chrono::steady_clock::now();
      for (int spins = 0; epoch_.load(std::memory_order_acquire) == seen; ++spins) {
        pause(spins);
        if (spins % 1024 == 1023 && std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(SPIN_NS)) {
          std::unique_lock<std::mutex> lock(sleep_);
          sleeping_.fetch_add(1);
          cv_.wait(lock, [&] { return epoch_.load() != seen; });
          sleeping_.fetch_sub(1);
        }
      }
      seen = epoch_.load();
      work();
      pending_.fetch_sub(1, std::memory_order_release);
    }
  }

  const pid_t pid_;
  std::vector<std::thread> helpers_;
  std::mutex busy_, sleep_;
  std::condition_variable cv_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<int> sleeping_{0}, pending_{0};
  std::atomic<int64_t> next_{0};
  const Task* job_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
};

}  // namespace lanes
