/* SPDX-License-Identifier: MIT */
/* simsdk.c — see simsdk.h. */
#define _GNU_SOURCE
#include "simsdk.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIMSDK_MAX_BUFFERS 64

enum { ST_OPEN, ST_CONFIGURED, ST_RUNNING };
enum { SLOT_FREE, SLOT_FILLED, SLOT_TAKEN };

struct simsdk_device {
    pthread_mutex_t lock;
    pthread_cond_t filled;
    pthread_t thread;
    int thread_started;
    int state;
    int stop;
    int64_t frame_len;
    double rate_hz;
    int64_t seed;
    float *buffers[SIMSDK_MAX_BUFFERS];
    int slot_state[SIMSDK_MAX_BUFFERS];
    int64_t slot_seq[SIMSDK_MAX_BUFFERS];
    int nbuffers;
    int64_t queue[SIMSDK_MAX_BUFFERS]; /* filled slots, in frame order */
    int qhead, qlen;
    int next_slot;
    int64_t produced, dropped;
    simsdk_frame_fn fn;
    void *user;
};

const char *simsdk_strerror(int code) {
    switch (code) {
    case SIMSDK_OK: return "ok";
    case SIMSDK_EINVAL: return "simsdk: invalid argument";
    case SIMSDK_ESTATE: return "simsdk: not allowed in the device's current state";
    case SIMSDK_ENOMEM: return "simsdk: out of memory";
    case SIMSDK_EFULL: return "simsdk: no room for another buffer";
    case SIMSDK_ETHREAD: return "simsdk: cannot start the acquisition thread";
    default: return "simsdk: unknown error";
    }
}

int simsdk_open(const char *serial, simsdk_device **dev) {
    if (!serial || !dev || strncmp(serial, "sim", 3) != 0) return SIMSDK_EINVAL;
    simsdk_device *d = calloc(1, sizeof *d);
    if (!d) return SIMSDK_ENOMEM;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->filled, NULL);
    d->state = ST_OPEN;
    *dev = d;
    return SIMSDK_OK;
}

int simsdk_configure(simsdk_device *dev, int64_t frame_len, double rate_hz, int64_t seed) {
    if (!dev || frame_len <= 0 || !(rate_hz >= 0.0)) return SIMSDK_EINVAL;
    pthread_mutex_lock(&dev->lock);
    int rc = SIMSDK_OK;
    if (dev->state == ST_RUNNING) rc = SIMSDK_ESTATE;
    else if (dev->nbuffers > 0 && frame_len != dev->frame_len) rc = SIMSDK_ESTATE; /* buffers have the old size */
    else {
        dev->frame_len = frame_len;
        dev->rate_hz = rate_hz;
        dev->seed = seed;
        dev->state = ST_CONFIGURED;
    }
    pthread_mutex_unlock(&dev->lock);
    return rc;
}

int simsdk_register_buffer(simsdk_device *dev, float *buf, int64_t n) {
    if (!dev || !buf) return SIMSDK_EINVAL;
    pthread_mutex_lock(&dev->lock);
    int rc = SIMSDK_OK;
    if (dev->state != ST_CONFIGURED) rc = SIMSDK_ESTATE;
    else if (n != dev->frame_len) rc = SIMSDK_EINVAL;
    else if (dev->nbuffers >= SIMSDK_MAX_BUFFERS) rc = SIMSDK_EFULL;
    else {
        dev->buffers[dev->nbuffers] = buf;
        dev->slot_state[dev->nbuffers] = SLOT_FREE;
        dev->nbuffers++;
    }
    pthread_mutex_unlock(&dev->lock);
    return rc;
}

int simsdk_set_callback(simsdk_device *dev, simsdk_frame_fn fn, void *user) {
    if (!dev) return SIMSDK_EINVAL;
    pthread_mutex_lock(&dev->lock);
    int rc = SIMSDK_OK;
    if (dev->state == ST_RUNNING) rc = SIMSDK_ESTATE;
    else {
        dev->fn = fn;
        dev->user = user;
    }
    pthread_mutex_unlock(&dev->lock);
    return rc;
}

static void fill_frame(float *frame, int64_t n, int64_t seq, int64_t seed) {
    for (int64_t i = 0; i < n; i++) frame[i] = (float)(((seq * 131 + i * 7 + seed) % 1000) / 1000.0);
}

static void sleep_ns(int64_t ns) {
    struct timespec ts = {ns / 1000000000, ns % 1000000000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static void *acquire_loop(void *arg) {
    simsdk_device *d = (simsdk_device *)arg;
    int64_t period = d->rate_hz > 0 ? (int64_t)(1e9 / d->rate_hz) : 0;
    for (;;) {
        if (period) sleep_ns(period);
        pthread_mutex_lock(&d->lock);
        if (d->stop) {
            pthread_mutex_unlock(&d->lock);
            break;
        }
        int64_t seq = d->produced++;
        int slot = -1;
        for (int k = 0; k < d->nbuffers; k++) {
            int s = (d->next_slot + k) % d->nbuffers;
            if (d->slot_state[s] == SLOT_FREE) {
                slot = s;
                break;
            }
        }
        if (slot < 0) {
            d->dropped++;
            pthread_mutex_unlock(&d->lock);
            if (!period) sleep_ns(20000); /* let the consumer catch up */
            continue;
        }
        d->next_slot = (slot + 1) % d->nbuffers;
        d->slot_state[slot] = SLOT_TAKEN; /* being filled */
        float *frame = d->buffers[slot];
        int64_t n = d->frame_len;
        simsdk_frame_fn fn = d->fn;
        void *user = d->user;
        pthread_mutex_unlock(&d->lock);

        fill_frame(frame, n, seq, d->seed);
        int stop = fn ? fn(user, frame, n, seq) : 0;

        pthread_mutex_lock(&d->lock);
        d->slot_state[slot] = SLOT_FILLED;
        d->slot_seq[slot] = seq;
        d->queue[(d->qhead + d->qlen) % SIMSDK_MAX_BUFFERS] = slot;
        d->qlen++;
        if (stop) d->stop = 1;
        pthread_cond_broadcast(&d->filled);
        pthread_mutex_unlock(&d->lock);
        if (stop) break;
    }
    return NULL;
}

int simsdk_start(simsdk_device *dev) {
    if (!dev) return SIMSDK_EINVAL;
    pthread_mutex_lock(&dev->lock);
    int rc = SIMSDK_OK;
    if (dev->state != ST_CONFIGURED || dev->nbuffers == 0) rc = SIMSDK_ESTATE;
    else {
        dev->stop = 0;
        if (pthread_create(&dev->thread, NULL, acquire_loop, dev) != 0) rc = SIMSDK_ETHREAD;
        else {
            dev->thread_started = 1;
            dev->state = ST_RUNNING;
        }
    }
    pthread_mutex_unlock(&dev->lock);
    return rc;
}

int simsdk_stop(simsdk_device *dev) {
    if (!dev) return SIMSDK_EINVAL;
    pthread_mutex_lock(&dev->lock);
    if (dev->state != ST_RUNNING) {
        pthread_mutex_unlock(&dev->lock);
        return SIMSDK_ESTATE;
    }
    if (dev->thread_started && pthread_equal(dev->thread, pthread_self())) {
        pthread_mutex_unlock(&dev->lock);
        return SIMSDK_ESTATE; /* from the device's own callback: it would join itself */
    }
    dev->stop = 1;
    pthread_cond_broadcast(&dev->filled);
    pthread_mutex_unlock(&dev->lock);
    pthread_join(dev->thread, NULL);
    pthread_mutex_lock(&dev->lock);
    dev->thread_started = 0;
    dev->state = ST_CONFIGURED;
    pthread_mutex_unlock(&dev->lock);
    return SIMSDK_OK;
}

int simsdk_wait(simsdk_device *dev, int timeout_ms, int64_t *slot, int64_t *seq) {
    if (!dev || !slot || !seq || timeout_ms < 0) return SIMSDK_EINVAL;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&dev->lock);
    if (dev->state != ST_RUNNING && dev->qlen == 0) {
        pthread_mutex_unlock(&dev->lock);
        return SIMSDK_ESTATE;
    }
    while (dev->qlen == 0 && !dev->stop) {
        if (pthread_cond_timedwait(&dev->filled, &dev->lock, &until) == ETIMEDOUT) break;
    }
    int rc = 0;
    if (dev->qlen > 0) {
        int s = (int)dev->queue[dev->qhead];
        dev->qhead = (dev->qhead + 1) % SIMSDK_MAX_BUFFERS;
        dev->qlen--;
        dev->slot_state[s] = SLOT_TAKEN;
        *slot = s;
        *seq = dev->slot_seq[s];
        rc = 1;
    }
    pthread_mutex_unlock(&dev->lock);
    return rc;
}

int simsdk_requeue(simsdk_device *dev, int64_t slot) {
    if (!dev) return SIMSDK_EINVAL;
    pthread_mutex_lock(&dev->lock);
    int rc = SIMSDK_OK;
    if (slot < 0 || slot >= dev->nbuffers || dev->slot_state[slot] != SLOT_TAKEN) rc = SIMSDK_EINVAL;
    else dev->slot_state[slot] = SLOT_FREE;
    pthread_mutex_unlock(&dev->lock);
    return rc;
}

int64_t simsdk_frames_produced(const simsdk_device *dev) {
    simsdk_device *d = (simsdk_device *)dev;
    pthread_mutex_lock(&d->lock);
    int64_t n = d->produced;
    pthread_mutex_unlock(&d->lock);
    return n;
}

int64_t simsdk_frames_dropped(const simsdk_device *dev) {
    simsdk_device *d = (simsdk_device *)dev;
    pthread_mutex_lock(&d->lock);
    int64_t n = d->dropped;
    pthread_mutex_unlock(&d->lock);
    return n;
}

int simsdk_close(simsdk_device *dev) {
    if (!dev) return SIMSDK_EINVAL;
    pthread_mutex_lock(&dev->lock);
    int running = dev->state == ST_RUNNING;
    int self = dev->thread_started && pthread_equal(dev->thread, pthread_self());
    pthread_mutex_unlock(&dev->lock);
    if (self) return SIMSDK_ESTATE;
    if (running) simsdk_stop(dev);
    pthread_cond_destroy(&dev->filled);
    pthread_mutex_destroy(&dev->lock);
    free(dev);
    return SIMSDK_OK;
}
