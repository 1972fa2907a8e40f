#include "base/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace cairn {
namespace {

struct Flag {
  Mutex mu;
  CondVar cv;
  bool set GUARDED_BY(mu) = false;
};

TEST(MutexTest, WaitReturnsOnceAnotherThreadSetsTheCondition) {
  Flag f;
  std::thread setter([&] {
    MutexLock lock(f.mu);
    f.set = true;
    f.cv.NotifyAll();
  });
  {
    MutexLock lock(f.mu);
    while (!f.set) f.cv.Wait(f.mu);
    EXPECT_TRUE(f.set);
  }
  setter.join();
}

TEST(MutexTest, TimedWaitsSayWhetherTheyTimedOut) {
  Flag f;
  MutexLock lock(f.mu);
  EXPECT_FALSE(f.cv.WaitFor(f.mu, std::chrono::milliseconds(1)));
  EXPECT_FALSE(f.cv.WaitUntil(f.mu, std::chrono::steady_clock::now()));
  // Still held after a wait: another thread cannot take it.
  bool taken = true;
  std::thread other([&] {
    if (f.mu.try_lock()) {
      f.mu.unlock();
    } else {
      taken = false;
    }
  });
  other.join();
  EXPECT_FALSE(taken);
}

TEST(MutexTest, AnUnlockedMutexLockLetsOthersInAndReleasesOnlyWhatItHolds) {
  Mutex mu;
  int value = 0;
  {
    MutexLock lock(mu);
    lock.Unlock();
    std::thread other([&] {
      MutexLock inner(mu);
      value = 1;
    });
    other.join();
    lock.Lock();
    EXPECT_EQ(value, 1);
    lock.Unlock();
  }  // released once, by Unlock: the destructor leaves it alone
  if (mu.try_lock()) {
    mu.unlock();
  } else {
    ADD_FAILURE() << "the mutex is still held";
  }
}

}  // namespace
}  // namespace cairn
