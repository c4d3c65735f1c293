/* SPDX-License-Identifier: MIT */
/* physics_kundef.h — undefines the parameters of one physics_simd.h instantiation
 * (physics.c includes it after each). Not a public header. */
#undef K_NAME
#undef K_SYM_NAME
#undef K_REAL
#undef K_VEC
#undef K_W
#undef K_SET1
#undef K_ZERO
#undef K_LOAD
#undef K_STORE
#undef K_SUB
#undef K_ADD
#undef K_MUL
#undef K_FMADD
#undef K_FNMADD
#undef K_INV3
#undef K_RCUBE
#undef K_ACC_SCALE
#undef K_KEEP_NONZERO
#undef K_TRI_MASK
#undef K_HSUM
#undef K_ROW_PAIRS
#undef K_I_VECS
