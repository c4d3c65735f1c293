/* SPDX-License-Identifier: MIT */
/* physics: declarations mirrored from csrc/tensorffi.h (section "physics"). */
