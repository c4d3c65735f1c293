/* SPDX-License-Identifier: MIT */
/* signal: declarations mirrored from csrc/tensorffi.h (section "signal"). */
