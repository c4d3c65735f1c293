/* SPDX-License-Identifier: MIT */
/* parse: declarations mirrored from csrc/tensorffi.h (section "parse"). */
