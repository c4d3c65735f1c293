/* SPDX-License-Identifier: MIT */
/* parse_guard.c — reading an input that may shrink while it is read (below). */
#define _GNU_SOURCE
#define TF_INTERNAL
#include "parse_internal.h"

/* ======================================================================== */
/* input that shrinks while it is read                                     */
/* ======================================================================== */

/* A memory-mapped file truncated by another process (or thread) while it is parsed
 * turns reads past its new end into SIGBUS; a source tensor whose storage is freed or
 * reallocated under the parse (from a progress callback or another thread) can turn
 * them into SIGSEGV. Either used to kill the process. Every read of the input runs
 * under a guard: a fault whose address lies inside the input, on a thread that is
 * inside a guarded region, jumps back to the guard (siglongjmp), and the call fails
 * with TF_EIO ("the input changed while it was read"); any other fault goes to the
 * handler that was installed before ours (Python's faulthandler, say), or to the
 * default action, exactly as before.
 *
 * Why a guard rather than pread into owned buffers: the guard costs one sigsetjmp per
 * chunk (no signal mask is saved: a few nanoseconds per megabyte) and keeps the
 * zero-copy, memory-mapped design (no second copy of a large file, no extra pass over
 * memory); reading with pread would cost a copy of the whole input (about 10% of the
 * parse at 1 GB/s per core) and a rewrite of the chunking, and still leave memory-
 * mapped inputs that Python hands us (mmap objects, tensors) unprotected.
 *
 * Global state, justified: the previous handlers (written once, under pthread_once,
 * before our handler is installed, and only read afterwards) and one thread-local
 * pointer to the innermost guard of each thread (a signal handler has no other way to
 * find it; faults are delivered to the thread that faulted). The handler is installed
 * with SA_NODEFER, so jumping out of it leaves the signal unblocked (sigsetjmp does not
 * save the mask). The jump leaves code that holds no locks and no allocations: guarded
 * regions only read the input and write the caller's buffers. */
typedef struct tf_guard {
    sigjmp_buf env;
    uintptr_t lo, hi;   /* the input: faults outside it are not ours */
    uintptr_t addr;     /* where the fault was */
    struct tf_guard *prev;
} tf_guard;

static _Thread_local tf_guard *tf_guard_top;
static struct sigaction tf_prev_bus, tf_prev_segv;
static pthread_once_t tf_guard_once = PTHREAD_ONCE_INIT;

static void tf_guard_handler(int sig, siginfo_t *si, void *uc) {
    tf_guard *g = tf_guard_top;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (g && si->si_code > 0 && a >= g->lo && a < g->hi) {
        g->addr = a;
        siglongjmp(g->env, 1);
    }
    const struct sigaction *prev = sig == SIGBUS ? &tf_prev_bus : &tf_prev_segv;
    if (prev->sa_flags & SA_SIGINFO) {
        prev->sa_sigaction(sig, si, uc);
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
        prev->sa_handler(sig);
    } else {
        /* Back to the default action: a faulting access runs again and ends the process
         * as it would have without us; a signal that was sent is sent again. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        if (si->si_code <= 0) raise(sig);
    }
}

static void tf_guard_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = tf_guard_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &tf_prev_bus);
    sigaction(SIGSEGV, &sa, &tf_prev_segv);
}

/* Run fn(arg) with faults on [lo, hi) caught: returns -1, or the offset from lo of the
 * faulting address (fn was abandoned there). */
int64_t tf_guarded(const uint8_t *lo, const uint8_t *hi, void (*fn)(void *), void *arg) {
    pthread_once(&tf_guard_once, tf_guard_install);
    tf_guard g;
    g.lo = (uintptr_t)lo;
    g.hi = (uintptr_t)hi;
    g.addr = 0;
    g.prev = tf_guard_top;
    tf_guard_top = &g;
    if (sigsetjmp(g.env, 0) != 0) {
        tf_guard_top = g.prev;
        return (int64_t)(g.addr - g.lo);
    }
    fn(arg);
    tf_guard_top = g.prev;
    return -1;
}

int tf_changed_error(const char *fname, int64_t at) {
    return tf_error(TF_EIO,
                    "%s: the input changed while it was read: byte %lld could not be read (a memory-mapped file "
                    "truncated, or a source tensor's storage resized or freed, during the call)",
                    fname, (long long)at);
}
