// Clang's thread-safety annotations (-Wthread-safety), as macros that are
// empty under other compilers. A member written
//
//   int count_ GUARDED_BY(mu_);
//
// with `mu_` a cairn::Mutex (base/mutex.h) is then checked at compile time:
// the clang tree (the asan-ubsan preset, which CI builds) warns, as an
// error (-Werror), wherever it is read or written without `mu_` held; a
// function that expects the lock held (the `...Locked` helpers) says
// REQUIRES(mu_). See https://clang.llvm.org/docs/ThreadSafetyAnalysis.html.
//
// std::mutex carries no annotations in libstdc++: guarded members use
// cairn::Mutex, and wait on a cairn::CondVar (base/mutex.h).
#pragma once

#if defined(__clang__)
#define CAIRN_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define CAIRN_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) CAIRN_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY CAIRN_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) CAIRN_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) CAIRN_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) CAIRN_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) CAIRN_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) CAIRN_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) CAIRN_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) CAIRN_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) CAIRN_THREAD_ANNOTATION(assert_capability(x))
#define NO_THREAD_SAFETY_ANALYSIS CAIRN_THREAD_ANNOTATION(no_thread_safety_analysis)
