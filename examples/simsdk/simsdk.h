/* SPDX-License-Identifier: MIT */
/*
 * simsdk — a simulated acquisition-device SDK, the kind of vendor C API that
 * tensorffi binds: an opaque device handle, buffers that the device fills after
 * the call that registered them has returned, frames delivered through a callback
 * from the SDK's own thread, status codes with error strings, and state rules that
 * a caller can break (start before configure...).
 *
 * Frame `seq` holds frame[i] = ((seq * 131 + i * 7 + seed) % 1000) / 1000.0f, so
 * a receiver can check every value it gets.
 */
#ifndef SIMSDK_H
#define SIMSDK_H

#include <stdint.h>

typedef struct simsdk_device simsdk_device;

enum {
    SIMSDK_OK = 0,
    SIMSDK_EINVAL = -1,   /* an argument is invalid */
    SIMSDK_ESTATE = -2,   /* not allowed in the device's current state */
    SIMSDK_ENOMEM = -3,   /* out of memory */
    SIMSDK_EFULL = -4,    /* no room for another buffer */
    SIMSDK_ETHREAD = -5   /* the acquisition thread could not start */
};

/* A frame callback, called from the SDK's acquisition thread after a frame has
 * been written to a registered buffer (`frame` points into that buffer). A
 * non-zero return stops the acquisition. */
typedef int (*simsdk_frame_fn)(void *user, const float *frame, int64_t n, int64_t seq);

/* A static, human-readable message for a status code. */
const char *simsdk_strerror(int code);

/* Open the device named `serial` ("sim0", "sim1", ...); *dev receives it. */
int simsdk_open(const char *serial, simsdk_device **dev);
/* Stop the acquisition, join its thread and free the device (once!). */
int simsdk_close(simsdk_device *dev);

/* Frames of `frame_len` floats at `rate_hz` frames per second (0: as fast as
 * possible). Only while stopped. */
int simsdk_configure(simsdk_device *dev, int64_t frame_len, double rate_hz, int64_t seed);
/* Add `buf` (frame_len floats) to the device's ring of buffers; the device writes
 * frames into it until it is closed. Up to 64 buffers; only while stopped. */
int simsdk_register_buffer(simsdk_device *dev, float *buf, int64_t n);
/* Call `fn(user, frame, n, seq)` for every frame, from the acquisition thread. */
int simsdk_set_callback(simsdk_device *dev, simsdk_frame_fn fn, void *user);

/* Start/stop the acquisition thread (start needs configure and a buffer). */
int simsdk_start(simsdk_device *dev);
int simsdk_stop(simsdk_device *dev);

/* Wait up to `timeout_ms` for a filled buffer: returns 1 and its index in *slot
 * and frame number in *seq, 0 on timeout, or a negative status. The buffer is the
 * caller's until it is given back with simsdk_requeue. */
int simsdk_wait(simsdk_device *dev, int timeout_ms, int64_t *slot, int64_t *seq);
/* Give buffer `slot` back to the device. */
int simsdk_requeue(simsdk_device *dev, int64_t slot);

/* Frames produced, and frames dropped because no buffer was free. */
int64_t simsdk_frames_produced(const simsdk_device *dev);
int64_t simsdk_frames_dropped(const simsdk_device *dev);

#endif
