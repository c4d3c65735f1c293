/* SPDX-License-Identifier: MIT */
/* bridge_call.c — the bridge's native call path: the one file in csrc/ that uses the
 * CPython API (DESIGN.md, "One exception: the bridge's call path").
 *
 * Why it exists: checking a tensor from Python costs a dozen attribute reads, each
 * 50–200 ns; a C function with two tensors paid more for its checks than for the call.
 * From C, PyTorch's DLPack C exchange API (type(t).__dlpack_c_exchange_api__) gives a
 * tensor's data pointer, shape, strides, dtype and device in one call without
 * allocating, and a NumPy array's struct gives the same directly.
 *
 * What it does: a NativeCall object runs one bound function from a compact
 * description that tensorffi/_bridge/lower.py derives from the function's contract
 * plan (the plan stays the one place where contract semantics live). It reads the
 * arguments, checks every rule the Python path checks — dtype, device, contiguity,
 * the negative and conjugate bits, the storage's real extent (a storage resized under
 * a view), writability (with tensors viewing read-only buffers, see
 * tensorffi/_bridge/readonly.py), requires_grad (written arguments: never; read ones:
 * only with grad mode off) and inference tensors for written arguments,
 * the contract's symbolic shapes, filled-in lengths, scalar ranges, aliasing between
 * written arguments — allocates outputs in the caller's kind, releases the GIL around
 * the C call, bumps the version counter of the tensors C wrote and turns a failed
 * status into the library's exception.
 *
 * What it never does: decide that a call is wrong. Any argument it does not accept as
 * it is (a wrong dtype, a view the contract lets the bridge copy, a size that
 * disagrees, a NumPy integer where a Python int is usual, a type it does not know) is
 * handed, untouched, to the Python path generated from the same plan, which makes the
 * copy the contract allows or raises the error that names the argument. Every check
 * here is one the Python path makes too, so the two accept the same calls; the test
 * suite runs the bridge's tests on both (TENSORFFI_BRIDGE=python forces the latter).
 *
 * State: the configuration below is written once, at import, under the GIL, and only
 * read afterwards; everything a call needs lives on its C stack. The kernels of
 * tensorffi never include Python.h.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define TF_INTERNAL
#include "tensorffi.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ------------------------------------------------------------------------ */
/* DLPack (dmlc/dlpack include/dlpack/dlpack.h, v1.3): the parts read here    */
/* ------------------------------------------------------------------------ */

typedef struct { int32_t device_type, device_id; } tfb_DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } tfb_DLDataType;
typedef struct {
    void *data;
    tfb_DLDevice device;
    int32_t ndim;
    tfb_DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} tfb_DLTensor;
typedef struct { uint32_t major, minor; } tfb_DLPackVersion;
typedef struct tfb_DLMTV {
    tfb_DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct tfb_DLMTV *self);
    uint64_t flags;
    tfb_DLTensor dl_tensor;
} tfb_DLMTV;
typedef struct tfb_APIHeader {
    tfb_DLPackVersion version;
    struct tfb_APIHeader *prev_api;
} tfb_APIHeader;
typedef struct {
    tfb_APIHeader header;
    void *managed_tensor_allocator;
    void *managed_tensor_from_py_object_no_sync;
    int (*managed_tensor_to_py_object_no_sync)(tfb_DLMTV *tensor, void **out_py_object);
    int (*dltensor_from_py_object_no_sync)(void *py_object, tfb_DLTensor *out);
    void *current_work_stream;
} tfb_ExchangeAPI;

enum { TFB_kDLCPU = 1 };
enum { TFB_kDLInt = 0, TFB_kDLUInt = 1, TFB_kDLFloat = 2, TFB_kDLBfloat = 4, TFB_kDLComplex = 5, TFB_kDLBool = 6 };

/* ------------------------------------------------------------------------ */
/* NumPy's array and dtype structs: the leading fields, which NumPy 1 and 2   */
/* share (pybind11 reads them the same way). bridge_configure() checks them   */
/* against a probe array and turns the NumPy path off if they disagree.       */
/* ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} tfb_ndarray;
typedef struct {
    PyObject_HEAD
    PyTypeObject *typeobj;
    char kind, type, byteorder, former_flags;
    int type_num;
} tfb_descr;
enum { TFB_NPY_C_CONTIGUOUS = 0x0001, TFB_NPY_ALIGNED = 0x0100, TFB_NPY_WRITEABLE = 0x0400 };

/* ------------------------------------------------------------------------ */
/* Element types (the order is the lowering's dtype code: bridge_dtypes())    */
/* ------------------------------------------------------------------------ */

#define TFB_NDTYPES 16
#define TFB_NUMS 4
enum { TFB_F32 = 3, TFB_F64 = 4, TFB_INT8 = 7, TFB_UINT8 = 8, TFB_BOOL_CODE = 15 }; /* codes of the table below */
static const struct {
    const char *name;
    uint8_t code, bits;
    int itemsize;
} tfb_dtypes[TFB_NDTYPES] = {
    {"any", 0, 0, 0},
    {"float16", TFB_kDLFloat, 16, 2},
    {"bfloat16", TFB_kDLBfloat, 16, 2},
    {"float32", TFB_kDLFloat, 32, 4},
    {"float64", TFB_kDLFloat, 64, 8},
    {"complex64", TFB_kDLComplex, 64, 8},
    {"complex128", TFB_kDLComplex, 128, 16},
    {"int8", TFB_kDLInt, 8, 1},
    {"uint8", TFB_kDLUInt, 8, 1},
    {"int16", TFB_kDLInt, 16, 2},
    {"uint16", TFB_kDLUInt, 16, 2},
    {"int32", TFB_kDLInt, 32, 4},
    {"uint32", TFB_kDLUInt, 32, 4},
    {"int64", TFB_kDLInt, 64, 8},
    {"uint64", TFB_kDLUInt, 64, 8},
    {"bool", TFB_kDLBool, 8, 1},
};

/* ------------------------------------------------------------------------ */
/* Configuration: written once by bridge_configure() under the GIL            */
/* ------------------------------------------------------------------------ */

typedef struct {
    PyObject *descr;     /* a method or getset descriptor of torch._C.TensorBase */
    PyCFunction noargs;  /* its METH_NOARGS C function, or NULL: call the descriptor */
    PyGetSetDef *getset; /* for getset descriptors */
} tfb_attr;

static struct {
    int torch_ok, numpy_ok;
    const tfb_ExchangeAPI *api;
    PyTypeObject *tensor_type, *parameter_type, *storage_type, *ndarray_type;
    tfb_attr is_neg, is_conj, untyped_storage, storage_data_ptr, requires_grad, version;
    PyObject *bump;     /* torch._C._increment_version */
    PyObject *grad_enabled;  /* torch.is_grad_enabled */
    PyCFunction grad_fn;     /* its METH_NOARGS C function (a thread-local read), or NULL */
    PyObject *grad_self;
    /* tensorffi._bridge.readonly.overlaps(address, nbytes): whether torch memory lies in
     * a read-only buffer (bytes, a read-only mmap or NumPy array torch.frombuffer /
     * torch.from_numpy viewed); asked only while readonly_count (atomic: set from any
     * thread by bridge_readonly_count) says such memory is alive. */
    PyObject *readonly_find;
    int64_t readonly_count;
    PyObject *np_empty; /* numpy.empty */
    PyObject *np_dtype[TFB_NDTYPES];
    int np_nums[TFB_NDTYPES][TFB_NUMS]; /* NumPy type numbers of each element type (-1: none) */
    char np_native;                      /* NumPy's byte-order character of this machine */
} cfg;

/* ------------------------------------------------------------------------ */
/* The lowered description of one function (see lower.py for the encoding)   */
/* ------------------------------------------------------------------------ */

#define TFB_VERSION 4
#define TFB_MAX_HIDDEN 8
#define TFB_MAX_PARAMS 32
#define TFB_MAX_SYMS 32
#define TFB_MAX_RANK 8
#define TFB_MAX_DIMSYMS 4
#define TFB_MAX_INPUTS 48

enum { TFB_ARRAY = 1, TFB_INT = 2, TFB_FLOAT = 3 };
enum { TFB_IN = 0, TFB_OUT = 1, TFB_INOUT = 2 };
enum { TFB_RET_NONE = 0, TFB_RET_STATUS = 1, TFB_RET_COUNT = 2, TFB_RET_VALUE = 3 };
enum { TFB_RES_VOID = 0, TFB_RES_INT = 1, TFB_RES_UINT = 2, TFB_RES_FLOAT = 3, TFB_RES_BOOL = 4 };
enum { TFB_FILL_NONE = 0, TFB_FILL_DIM = 1, TFB_FILL_NUMEL = 2 };
/* flags: an operator's body (tensors in operator order, outputs first, the C result
 * as a 0-d tensor; tensors that require grad may be written: the operator layer decided) */
enum { TFB_KERNEL = 1 };

typedef struct {
    int64_t factor;
    int nsym;
    int sym[TFB_MAX_DIMSYMS];
} tfb_dim;

typedef struct {
    int kind;  /* TFB_ARRAY | TFB_INT | TFB_FLOAT */
    int input; /* where the caller passes it (index into the inputs) */
    /* arrays */
    int dtype, role, optional, rank; /* rank -1: no shape in the contract */
    int min_len, min_len2;           /* integer parameters C takes as its length, a product where
                                        two are named (-1: none) */
    int min_bytes;                   /* that length counts bytes, not elements */
    tfb_dim dims[TFB_MAX_RANK];
    /* integers */
    int is_unsigned;
    int64_t lo;
    uint64_t hi;
    int sym;   /* the size symbol this parameter is (-1: none) */
    int alias; /* a fill `count = m` the caller may pass: binds symbol m (-1: none) */
    int fill, fill_numel;
    tfb_dim fill_dim;
    /* floats */
    int bits;
} tfb_param;

typedef union {
    int64_t i;
    uint64_t u;
    double d;
    float f;
    void *p;
} tfb_slot;

typedef void (*tfb_trampoline)(const void *args, void *result);

/* A C function called by its address alone, where no compiler ran to build a
 * trampoline (tensorffi.from_ctypes). On the x86-64 System V ABI, non-variadic
 * integer and pointer arguments travel in six integer registers and float and
 * double arguments in eight SSE registers, each class in declaration order, and the
 * callee reads only the registers its own parameters use: so one call through a
 * prototype of six integers and eight doubles, with every argument placed in its
 * class's next register (a float in the low 32 bits of its SSE register), passes
 * any signature that fits in registers. The result is read through a prototype of
 * the function's own result type. Elsewhere (TFB_GENERIC 0) the cffi call is used. */
#if defined(__x86_64__) && !defined(_WIN32)
#define TFB_GENERIC 1
#define TFB_GINT 6
#define TFB_GSSE 8
#define TFB_GARGS long long, long long, long long, long long, long long, long long, double, double, double, double, \
                  double, double, double, double
#define TFB_GPASS(g) (g).i[0], (g).i[1], (g).i[2], (g).i[3], (g).i[4], (g).i[5], (g).d[0], (g).d[1], (g).d[2], \
                     (g).d[3], (g).d[4], (g).d[5], (g).d[6], (g).d[7]
#else
#define TFB_GENERIC 0
#endif
typedef void (*tfb_any_fn)(void);

typedef struct {
    PyObject_HEAD
    PyObject *dict;
    vectorcallfunc vectorcall;
    int nparams, nsym, ninputs, npos, nreq, nfree, nfill, returns, result, flags, value_code, nhidden;
    int hidden_input[TFB_MAX_HIDDEN];
    tfb_param *params;
    int free_input[TFB_MAX_SYMS], free_sym[TFB_MAX_SYMS];
    int fill_order[TFB_MAX_PARAMS];
    PyObject *names;    /* tuple: the Python name of each input */
    tfb_trampoline tramp;
    tfb_any_fn gen_fn;    /* or: the function's address, called through the generic register call */
    char gen_class[TFB_MAX_PARAMS]; /* per parameter: 'i' integer register, 'f' float, 'd' double */
    char gen_result;      /* 'v' void, or a struct-module code: b B h H i I q Q ? f d */
    PyObject *pyfunc;   /* or: the cffi function, pointers taken as intptr_t (it releases the GIL) */
    PyObject *fallback; /* the Python path, called with the same arguments */
    PyObject *raise_status;
    PyObject *keep;     /* what keeps `tramp` loaded (the cffi library) */
    PyObject *hidden;   /* kernels: a tuple of callables giving the hidden parameters' values */
    PyObject *guard;    /* kernels: guard(*tensors), called when one requires grad in grad mode */
    PyObject *grad_enabled;
    /* C++ functions: the count of exceptions the module's guards caught and not yet
     * raised (read after every call), what raises this thread's, and what keeps both */
    const int *cxx_pending;
    PyObject *cxx_raise, *cxx_keep;
    /* called once, before the first call (tensorffi.UncheckedWarning), then dropped */
    PyObject *first_call;
    vectorcallfunc after_first;
} NativeCall;

/* Per-call state of one array parameter. */
typedef struct {
    PyObject *obj;     /* borrowed: the caller's array, or `owned` */
    PyObject *owned;   /* new reference: an output allocated here */
    PyObject *storage; /* new reference: the torch storage held for the call */
    char *addr;
    int64_t nbytes, numel;
    int present, numpy, written_tensor, ndim;
    int code; /* its element type (-1: one the table does not name) */
    int64_t shape[TFB_MAX_RANK];
} tfb_arr;

typedef struct {
    int64_t val[TFB_MAX_SYMS];
    unsigned char known[TFB_MAX_SYMS];
} tfb_syms;

/* ------------------------------------------------------------------------ */
/* Small helpers                                                              */
/* ------------------------------------------------------------------------ */

/* A lookup that failed with an ordinary exception means "not for this path": the
 * Python path will see the same thing and explain it. KeyboardInterrupt and other
 * non-Exception errors are never swallowed. Returns 0 (decline) or -1 (propagate). */
static int tfb_decline(void) {
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -1;
        PyErr_Clear();
    }
    return 0;
}

static PyObject *tfb_call_attr(const tfb_attr *a, PyObject *self) {
    if (a->getset != NULL)
        return a->getset->get(self, a->getset->closure);
    if (a->noargs != NULL)
        return a->noargs(self, NULL);
    return PyObject_CallOneArg(a->descr, self);
}

/* 1 if `a(self)` is True, 0 if False, -2 on an exception (cleared unless it must propagate). */
static int tfb_attr_true(const tfb_attr *a, PyObject *self) {
    PyObject *r = tfb_call_attr(a, self);
    if (r == NULL)
        return -2;
    int t = r == Py_True ? 1 : r == Py_False ? 0 : PyObject_IsTrue(r);
    Py_DECREF(r);
    return t < 0 ? -2 : t;
}

static int tfb_bind(tfb_syms *s, int sym, int64_t v) {
    if (s->known[sym])
        return s->val[sym] == v;
    s->val[sym] = v;
    s->known[sym] = 1;
    return 1;
}

/* The value of a dimension (factor * symbols), or 0 if a symbol is unknown or it overflows. */
static int tfb_dim_value(const tfb_dim *d, const tfb_syms *s, int64_t *out) {
    int64_t v = d->factor;
    for (int k = 0; k < d->nsym; k++) {
        if (!s->known[d->sym[k]])
            return 0;
        if (__builtin_mul_overflow(v, s->val[d->sym[k]], &v))
            return 0;
    }
    *out = v;
    return 1;
}

/* A non-negative exact Python int (not a bool: a size is never a bool). */
static int tfb_size_of(PyObject *v, int64_t *out) {
    if (!PyLong_CheckExact(v))
        return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred()) || x < 0) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Arrays                                                                     */
/* ------------------------------------------------------------------------ */

/* Whether grad mode is on: asked at most once per call (*mode: -1 not yet asked).
 * 1 on, 0 off, -2 on an exception. */
static int tfb_grad_mode(int *mode) {
    if (*mode < 0) {
        PyObject *on = cfg.grad_fn != NULL ? cfg.grad_fn(cfg.grad_self, NULL) : PyObject_CallNoArgs(cfg.grad_enabled);
        int t = on == NULL ? -1 : PyObject_IsTrue(on);
        Py_XDECREF(on);
        if (t < 0)
            return -2;
        *mode = t;
    }
    return *mode;
}

/* Whether [addr, addr + nbytes) lies in memory noted as read-only (-2: an exception). */
static int tfb_readonly(const char *addr, int64_t nbytes) {
    if (nbytes == 0 || __atomic_load_n(&cfg.readonly_count, __ATOMIC_ACQUIRE) == 0)
        return 0;
    PyObject *args[2] = {PyLong_FromVoidPtr((void *)addr), PyLong_FromLongLong(nbytes)};
    PyObject *r = args[0] != NULL && args[1] != NULL ? PyObject_Vectorcall(cfg.readonly_find, args, 2, NULL) : NULL;
    Py_XDECREF(args[0]);
    Py_XDECREF(args[1]);
    int t = r == NULL ? -1 : PyObject_IsTrue(r);
    Py_XDECREF(r);
    return t < 0 ? -2 : t;
}

/* A torch tensor the Python path would pass to C as it is. 1: accepted, 0: decline, -1: error.
 * grad_mode: see tfb_grad_mode (may be NULL where grad_ok: never asked). */
static int tfb_read_tensor(PyObject *v, const tfb_param *p, tfb_arr *a, int written, int grad_ok, int *grad_mode) {
    tfb_DLTensor d;
    if (cfg.api->dltensor_from_py_object_no_sync(v, &d) != 0)
        return tfb_decline(); /* sparse, meta, quantized, no storage (vmap)... */
    if (d.device.device_type != TFB_kDLCPU || d.dtype.lanes != 1 || d.dtype.bits % 8 != 0 || d.ndim < 0)
        return 0;
    if (p->dtype != 0 && (d.dtype.code != tfb_dtypes[p->dtype].code || d.dtype.bits != tfb_dtypes[p->dtype].bits))
        return 0;
    a->code = p->dtype;
    for (int c = 1; c < TFB_NDTYPES && a->code == 0; c++)
        if (tfb_dtypes[c].code == d.dtype.code && tfb_dtypes[c].bits == d.dtype.bits)
            a->code = c;
    if (a->code == 0)
        a->code = -1;
    int64_t itemsize = d.dtype.bits / 8, numel = 1;
    for (int k = 0; k < d.ndim; k++)
        numel *= d.shape[k]; /* torch keeps numel within int64 */
    if (numel != 0 && d.strides != NULL) { /* torch's is_contiguous(): size-1 dimensions do not count */
        int64_t z = 1;
        for (int k = d.ndim - 1; k >= 0; k--) {
            if (d.shape[k] == 1)
                continue;
            if (d.strides[k] != z)
                return 0;
            z *= d.shape[k];
        }
    }
    a->ndim = d.ndim;
    if (d.ndim <= TFB_MAX_RANK)
        memcpy(a->shape, d.shape, (size_t)d.ndim * sizeof(int64_t));
    char *addr = (char *)d.data + d.byte_offset;
    if (numel != 0 && addr == NULL)
        return 0; /* a functional tensor: its memory is not where C could see it */

    /* Lazy views whose memory does not hold their values (z.conj().imag). */
    int t = tfb_attr_true(&cfg.is_neg, v);
    if (t != 0)
        return t == 1 ? 0 : tfb_decline();
    if (d.dtype.code == TFB_kDLComplex) {
        t = tfb_attr_true(&cfg.is_conj, v);
        if (t != 0)
            return t == 1 ? 0 : tfb_decline();
    }
    if (!grad_ok) {
        /* A tensor that requires grad. Written: never (autograd cannot see C's write).
         * Read: only with grad mode off, else the result would be silently detached (the
         * Python path raises GradError). requires_grad first: most tensors C reads do
         * not require grad, and grad mode (a thread-local read in libc10, about as dear
         * as the getter) is then never asked; else asked once per call. */
        t = tfb_attr_true(&cfg.requires_grad, v);
        if (t == 1 && !written)
            t = tfb_grad_mode(grad_mode);
        if (t != 0)
            return t == 1 ? 0 : tfb_decline();
    }
    if (written) {
        /* An inference tensor has no version counter: reading it raises. The Python
         * path decides (allowed in inference mode, refused outside). */
        PyObject *ver = tfb_call_attr(&cfg.version, v);
        if (ver == NULL)
            return tfb_decline();
        Py_DECREF(ver);
    }

    /* The storage must hold every byte of the tensor (it may have been resized under
     * it); held for the call, so that another thread cannot free it meanwhile. */
    PyObject *st = tfb_call_attr(&cfg.untyped_storage, v);
    if (st == NULL)
        return tfb_decline();
    if (Py_TYPE(st) != cfg.storage_type) {
        Py_DECREF(st);
        return 0;
    }
    if (numel != 0) {
        Py_ssize_t nb = PyObject_Size(st);
        PyObject *lo_obj = nb < 0 ? NULL : tfb_call_attr(&cfg.storage_data_ptr, st);
        if (lo_obj == NULL) {
            Py_DECREF(st);
            return tfb_decline();
        }
        uintptr_t lo = (uintptr_t)PyLong_AsVoidPtr(lo_obj);
        Py_DECREF(lo_obj);
        if (PyErr_Occurred()) {
            Py_DECREF(st);
            return tfb_decline();
        }
        uintptr_t x = (uintptr_t)addr, span = (uintptr_t)(numel * itemsize);
        if (lo == 0 || x < lo || x - lo > (uintptr_t)nb || span > (uintptr_t)nb - (x - lo)) {
            Py_DECREF(st);
            return 0;
        }
        if (written) { /* memory of an immutable buffer (torch.frombuffer(bytes)): the Python path refuses */
            int ro = tfb_readonly(addr, numel * itemsize);
            if (ro != 0) {
                Py_DECREF(st);
                return ro == 1 ? 0 : tfb_decline();
            }
        }
    }
    a->storage = st;
    a->addr = addr;
    a->numel = numel;
    a->nbytes = numel * itemsize;
    a->numpy = 0;
    a->written_tensor = written;
    return 1;
}

static int tfb_np_dtype_code(int type_num) {
    for (int c = 1; c < TFB_NDTYPES; c++)
        for (int k = 0; k < TFB_NUMS; k++)
            if (cfg.np_nums[c][k] == type_num)
                return c;
    return -1;
}

/* A NumPy array the Python path would pass as it is: the exact dtype in native byte
 * order, C-contiguous, aligned, writeable if C writes it, and not a view of a torch
 * tensor's memory. */
static int tfb_read_ndarray(PyObject *v, const tfb_param *p, tfb_arr *a, int written) {
    const tfb_ndarray *arr = (const tfb_ndarray *)v;
    const tfb_descr *dsc = (const tfb_descr *)arr->descr;
    int f = arr->flags;
    if (!(f & TFB_NPY_C_CONTIGUOUS) || !(f & TFB_NPY_ALIGNED) || (written && !(f & TFB_NPY_WRITEABLE)))
        return 0;
    if (dsc->byteorder != '=' && dsc->byteorder != '|' && dsc->byteorder != cfg.np_native)
        return 0;
    int code = tfb_np_dtype_code(dsc->type_num);
    if (code < 0 || (p->dtype != 0 && code != p->dtype))
        return 0;
    /* A view of a torch tensor's memory (t.numpy()) needs its storage checked: the Python
     * path does that. Other bases (arrays, bytes, a bytearray NumPy holds an export of,
     * an mmap) are as the Python path sees them: memory the array holds. */
    PyObject *base = arr->base;
    for (int depth = 0; base != NULL; depth++) {
        if (depth == 64 || (cfg.tensor_type != NULL && PyType_IsSubtype(Py_TYPE(base), cfg.tensor_type)))
            return 0;
        base = Py_TYPE(base) == cfg.ndarray_type ? ((tfb_ndarray *)base)->base : NULL;
    }
    int64_t numel = 1;
    for (int k = 0; k < arr->nd; k++)
        numel *= arr->dimensions[k];
    a->ndim = arr->nd;
    for (int k = 0; k < arr->nd && k < TFB_MAX_RANK; k++)
        a->shape[k] = arr->dimensions[k];
    a->addr = arr->data;
    a->numel = numel;
    a->nbytes = numel * tfb_dtypes[code].itemsize;
    a->numpy = 1;
    a->code = code;
    return 1;
}

static int tfb_read_array(PyObject *v, const tfb_param *p, tfb_arr *a, int grad_ok, int *grad_mode) {
    int written = p->role != TFB_IN;
    PyTypeObject *t = Py_TYPE(v);
    if (cfg.torch_ok && (t == cfg.tensor_type || t == cfg.parameter_type))
        return tfb_read_tensor(v, p, a, written, grad_ok, grad_mode);
    if (cfg.numpy_ok && t == cfg.ndarray_type)
        return tfb_read_ndarray(v, p, a, written);
    if (t == &PyBytes_Type && !written && (p->dtype == 0 || p->dtype == TFB_INT8 || p->dtype == TFB_UINT8)) {
        /* bytes C reads (a text to parse): immutable, so its memory cannot move */
        a->addr = PyBytes_AS_STRING(v);
        a->numel = a->nbytes = PyBytes_GET_SIZE(v);
        a->ndim = 1;
        a->shape[0] = a->numel;
        a->code = TFB_UINT8;
        a->numpy = 1; /* outputs in NumPy's kind, as the Python path views bytes through NumPy */
        return 1;
    }
    return 0; /* strided(), bytes, Handle, DLPack arrays, subclasses: the Python path */
}

/* Bind or check the symbols of array p's shape; products are checked in tfb_products. */
static int tfb_bind_shape(const tfb_param *p, const tfb_arr *a, tfb_syms *s) {
    if (p->rank < 0)
        return 1;
    if (a->ndim != p->rank)
        return 0;
    for (int k = 0; k < p->rank; k++) {
        const tfb_dim *d = &p->dims[k];
        int64_t n = a->shape[k];
        if (d->nsym == 0) {
            if (n != d->factor)
                return 0;
        } else if (d->nsym == 1) {
            if (n % d->factor != 0 || !tfb_bind(s, d->sym[0], n / d->factor))
                return 0;
        }
    }
    return 1;
}

static int tfb_products(const tfb_param *p, const tfb_arr *a, const tfb_syms *s) {
    for (int k = 0; k < p->rank; k++) {
        const tfb_dim *d = &p->dims[k];
        int64_t want;
        if (d->nsym > 1 && (!tfb_dim_value(d, s, &want) || want != a->shape[k]))
            return 0;
    }
    return 1;
}

static void tfb_free_block(tfb_DLMTV *m) {
    free(m->dl_tensor.data);
    free(m);
}

/* A new C-contiguous CPU tensor, through the exchange API: its memory is freed by
 * torch (the deleter) when the tensor dies. About a third cheaper than torch.empty.
 * NULL with no exception where torch is not configured yet (not imported): the
 * Python path allocates it, importing torch. */
static PyObject *tfb_new_tensor(int code, int rank, const int64_t *shape, char **addr) {
    struct block {
        tfb_DLMTV m;
        int64_t shape[TFB_MAX_RANK], strides[TFB_MAX_RANK];
    } *b;
    if (!cfg.torch_ok)
        return NULL;
    int64_t numel = 1;
    for (int k = 0; k < rank; k++)
        if (__builtin_mul_overflow(numel, shape[k], &numel))
            return NULL;
    int64_t nbytes;
    if (__builtin_mul_overflow(numel, (int64_t)tfb_dtypes[code].itemsize, &nbytes) || nbytes > PY_SSIZE_T_MAX)
        return NULL;
    b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    /* Large outputs on huge pages when the kernel offers them, as NumPy does. */
    size_t align = nbytes >= (4 << 20) ? (size_t)2 << 20 : 64;
    void *data = NULL;
    if (posix_memalign(&data, align, nbytes > 0 ? (size_t)nbytes : 64) != 0) {
        free(b);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    if (align > 64)
        (void)madvise(data, (size_t)nbytes, MADV_HUGEPAGE);
#endif
    int64_t z = 1;
    for (int k = rank - 1; k >= 0; k--) {
        b->shape[k] = shape[k];
        b->strides[k] = z;
        z *= shape[k] > 0 ? shape[k] : 1;
    }
    b->m.version.major = 1;
    b->m.version.minor = 1;
    b->m.deleter = tfb_free_block;
    b->m.dl_tensor.data = data;
    b->m.dl_tensor.device.device_type = TFB_kDLCPU;
    b->m.dl_tensor.ndim = rank;
    b->m.dl_tensor.dtype.code = tfb_dtypes[code].code;
    b->m.dl_tensor.dtype.bits = tfb_dtypes[code].bits;
    b->m.dl_tensor.dtype.lanes = 1;
    b->m.dl_tensor.shape = b->shape;
    b->m.dl_tensor.strides = b->strides;
    void *out = NULL;
    if (cfg.api->managed_tensor_to_py_object_no_sync(&b->m, &out) != 0)
        return NULL; /* whether torch took the block is not said: leak it rather than free it twice */
    *addr = data;
    return (PyObject *)out;
}

static PyObject *tfb_new_ndarray(int code, int rank, const int64_t *shape, char **addr) {
    if (cfg.np_dtype[code] == NULL)
        return NULL;
    PyObject *dims = PyTuple_New(rank);
    if (dims == NULL)
        return NULL;
    for (int k = 0; k < rank; k++) {
        PyObject *n = PyLong_FromLongLong(shape[k]);
        if (n == NULL) {
            Py_DECREF(dims);
            return NULL;
        }
        PyTuple_SET_ITEM(dims, k, n);
    }
    PyObject *args[2] = {dims, cfg.np_dtype[code]};
    PyObject *arr = PyObject_Vectorcall(cfg.np_empty, args, 2, NULL);
    Py_DECREF(dims);
    if (arr == NULL)
        return NULL;
    if (Py_TYPE(arr) != cfg.ndarray_type) {
        Py_DECREF(arr);
        return NULL;
    }
    *addr = ((tfb_ndarray *)arr)->data;
    return arr;
}

/* ------------------------------------------------------------------------ */
/* The call                                                                   */
/* ------------------------------------------------------------------------ */

/* What a call holds: storages, outputs not returned, hidden parameters' values. */
static void tfb_release(const NativeCall *self, tfb_arr *arr, PyObject **hidden) {
    for (int i = 0; i < self->nparams; i++) {
        Py_CLEAR(arr[i].storage);
        Py_CLEAR(arr[i].owned);
    }
    for (int k = 0; k < self->nhidden; k++)
        Py_CLEAR(hidden[k]);
}

/* The value of an integer parameter the caller passed, within its C range. */
static int tfb_int_arg(const tfb_param *p, PyObject *v, tfb_slot *slot) {
    if (PyBool_Check(v)) {
        slot->i = v == Py_True;
    } else if (!PyLong_CheckExact(v)) {
        return 0;
    } else if (p->is_unsigned) {
        unsigned long long x = PyLong_AsUnsignedLongLong(v);
        if (x == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        slot->u = x;
        return x >= (uint64_t)(p->lo > 0 ? p->lo : 0) && x <= p->hi;
    } else {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        slot->i = x;
    }
    return slot->i >= p->lo && (slot->i < 0 || (uint64_t)slot->i <= p->hi);
}

/* A float for a C float/double: what the Python path accepts without conversion
 * (a float or an int; a finite value a C float cannot hold goes there to be refused). */
static int tfb_float_arg(const tfb_param *p, PyObject *v, tfb_slot *slot) {
    double x;
    if (PyFloat_CheckExact(v)) {
        x = PyFloat_AS_DOUBLE(v);
    } else if (PyLong_CheckExact(v)) {
        x = PyLong_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
    } else {
        return 0;
    }
    if (p->bits == 32) {
        if (x == x && x != 0.0 && x - x == 0.0) { /* finite, non-zero */
            double m = x < 0 ? -x : x;
            if (m > 3.4028234663852886e38 || m < 1.1754943508222875e-38)
                return 0;
        }
        slot->f = (float)x;
    } else {
        slot->d = x;
    }
    return 1;
}

#if TFB_GENERIC
typedef struct {
    long long i[TFB_GINT];
    double d[TFB_GSSE];
} tfb_gregs;

#define TFB_GCALL(T, fn, g) \
    do { \
        T (*f_)(TFB_GARGS); \
        memcpy(&f_, &(fn), sizeof f_); \
        res = (long long)f_(TFB_GPASS(g)); \
    } while (0)

static void tfb_generic_call(const NativeCall *self, const tfb_slot *slot, tfb_slot *ret) {
    tfb_gregs g;
    memset(&g, 0, sizeof g);
    int ni = 0, nf = 0;
    for (int k = 0; k < self->nparams; k++) {
        if (self->gen_class[k] == 'i') {
            g.i[ni++] = (long long)slot[k].i;
        } else {
            union {
                double d;
                float f;
                uint64_t u;
            } v;
            v.u = 0;
            if (self->gen_class[k] == 'f')
                v.f = slot[k].f; /* the low 32 bits of the register, as a float argument travels */
            else
                v.d = slot[k].d;
            g.d[nf++] = v.d;
        }
    }
    long long res = 0;
    switch (self->gen_result) {
    case 'v': {
        void (*f_)(TFB_GARGS);
        memcpy(&f_, &self->gen_fn, sizeof f_);
        f_(TFB_GPASS(g));
        return;
    }
    case 'f': {
        float (*f_)(TFB_GARGS);
        memcpy(&f_, &self->gen_fn, sizeof f_);
        ret->d = (double)f_(TFB_GPASS(g));
        return;
    }
    case 'd': {
        double (*f_)(TFB_GARGS);
        memcpy(&f_, &self->gen_fn, sizeof f_);
        ret->d = f_(TFB_GPASS(g));
        return;
    }
    case 'b': TFB_GCALL(signed char, self->gen_fn, g); break;
    case 'B': TFB_GCALL(unsigned char, self->gen_fn, g); break;
    case 'h': TFB_GCALL(short, self->gen_fn, g); break;
    case 'H': TFB_GCALL(unsigned short, self->gen_fn, g); break;
    case 'i': TFB_GCALL(int, self->gen_fn, g); break;
    case 'I': TFB_GCALL(unsigned int, self->gen_fn, g); break;
    case '?': TFB_GCALL(_Bool, self->gen_fn, g); break;
    case 'q': TFB_GCALL(long long, self->gen_fn, g); break;
    case 'Q': {
        unsigned long long (*f_)(TFB_GARGS);
        memcpy(&f_, &self->gen_fn, sizeof f_);
        ret->u = f_(TFB_GPASS(g));
        return;
    }
    default: return; /* refused when the call was made (nc_new) */
    }
    if (self->gen_result == 'B' || self->gen_result == 'H' || self->gen_result == 'I' || self->gen_result == '?')
        ret->u = (unsigned long long)res;
    else
        ret->i = res;
}
#else
static void tfb_generic_call(const NativeCall *self, const tfb_slot *slot, tfb_slot *ret) {
    (void)self;
    (void)slot;
    (void)ret;
}
#endif

static PyObject *tfb_result(NativeCall *self, tfb_slot r) {
    switch (self->result) {
    case TFB_RES_INT: return PyLong_FromLongLong(r.i);
    case TFB_RES_UINT: return PyLong_FromUnsignedLongLong(r.u);
    case TFB_RES_FLOAT: return PyFloat_FromDouble(r.d);
    case TFB_RES_BOOL: return PyBool_FromLong(r.i != 0);
    default: Py_RETURN_NONE;
    }
}

/* An operator's C result as a 0-d tensor of the result's own element type. */
static PyObject *tfb_value_tensor(const NativeCall *self, tfb_slot r) {
    int64_t none = 0;
    char *addr = NULL;
    PyObject *t = tfb_new_tensor(self->value_code, 0, &none, &addr);
    if (t == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return NULL;
    }
    double d = self->result == TFB_RES_FLOAT ? r.d : self->result == TFB_RES_UINT ? (double)r.u : (double)r.i;
    switch (self->value_code) {
    case TFB_F32: { float f = (float)d; memcpy(addr, &f, 4); break; }
    case TFB_F64: memcpy(addr, &d, 8); break;
    case TFB_BOOL_CODE: addr[0] = (char)(r.i != 0); break;
    default: memcpy(addr, &r.i, (size_t)tfb_dtypes[self->value_code].itemsize); break; /* integers: low bytes */
    }
    return t;
}

static PyObject *nc_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    NativeCall *self = (NativeCall *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *given[TFB_MAX_INPUTS];
    tfb_arr arr[TFB_MAX_PARAMS];
    tfb_slot slot[TFB_MAX_PARAMS];
    tfb_syms syms;
    int64_t fillv[TFB_MAX_PARAMS];
    PyObject *hidden[TFB_MAX_HIDDEN] = {NULL};
    int grad_mode = -1; /* asked once, if an input requires grad */
    memset(arr, 0, sizeof(tfb_arr) * (size_t)self->nparams);
    memset(syms.known, 0, (size_t)self->nsym);

    /* 1. arguments: positional, then keywords (None for a keyword means "not given") */
    if (nargs > self->npos)
        goto fallback; /* the full calling form, or too many: the Python path */
    for (Py_ssize_t i = 0; i < self->ninputs; i++)
        given[i] = i < nargs ? args[i] : NULL;
    if (kwnames != NULL) {
        Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t k = 0; k < nkw; k++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, k);
            Py_ssize_t found = -1;
            for (Py_ssize_t i = 0; i < self->ninputs && found < 0; i++)
                if (PyTuple_GET_ITEM(self->names, i) == key)
                    found = i;
            for (Py_ssize_t i = 0; i < self->ninputs && found < 0; i++)
                if (PyUnicode_Compare(PyTuple_GET_ITEM(self->names, i), key) == 0)
                    found = i;
            if (found < 0 || given[found] != NULL)
                goto fallback; /* unknown or repeated: Python's TypeError */
            PyObject *v = args[nargs + k];
            given[found] = (v == Py_None && found >= self->npos) ? NULL : v;
        }
    }
    for (int i = 0; i < self->nreq; i++)
        if (given[i] == NULL)
            goto fallback; /* missing: Python's TypeError */
    if (self->guard != NULL) { /* an operator writing its arguments: refused under autograd */
        int needs = 0;
        for (int i = 0; i < self->nparams && !needs; i++) {
            PyObject *v = self->params[i].kind == TFB_ARRAY ? given[self->params[i].input] : NULL;
            if (v != NULL && v != Py_None) {
                int t = tfb_attr_true(&cfg.requires_grad, v);
                if (t == -2)
                    goto error;
                needs = t;
            }
        }
        if (needs) {
            PyObject *on = PyObject_CallNoArgs(self->grad_enabled);
            int t = on == NULL ? -1 : PyObject_IsTrue(on);
            Py_XDECREF(on);
            if (t < 0)
                goto error;
            if (t)
                goto fallback; /* the Python kernel calls the guard, which explains */
        }
    }
    for (int k = 0; k < self->nhidden; k++) {
        hidden[k] = PyObject_CallNoArgs(PyTuple_GET_ITEM(self->hidden, k));
        if (hidden[k] == NULL)
            goto error;
        given[self->hidden_input[k]] = hidden[k];
    }

    /* 2. arrays: read, then their shapes */
    for (int i = 0; i < self->nparams; i++) {
        const tfb_param *p = &self->params[i];
        if (p->kind != TFB_ARRAY)
            continue;
        PyObject *v = given[p->input];
        if (v == NULL || v == Py_None) {
            if (p->role == TFB_OUT || p->optional) /* an operator passes None for an optional tensor */
                continue;
            goto fallback;
        }
        int r = tfb_read_array(v, p, &arr[i], self->flags & TFB_KERNEL, &grad_mode);
        if (r <= 0) {
            if (r < 0)
                goto error;
            goto fallback;
        }
        arr[i].obj = v;
        arr[i].present = 1;
        if (!tfb_bind_shape(p, &arr[i], &syms))
            goto fallback;
    }

    /* 3. sizes the caller passes: size parameters, lengths that alias a size, free sizes */
    for (int i = 0; i < self->nparams; i++) {
        const tfb_param *p = &self->params[i];
        int sym = p->kind == TFB_INT ? (p->sym >= 0 ? p->sym : p->alias) : -1;
        if (sym < 0 || given[p->input] == NULL)
            continue;
        int64_t v;
        if (!tfb_size_of(given[p->input], &v) || !tfb_bind(&syms, sym, v))
            goto fallback;
    }
    for (int k = 0; k < self->nfree; k++) {
        PyObject *v = given[self->free_input[k]];
        int64_t n;
        if (v != NULL && (!tfb_size_of(v, &n) || !tfb_bind(&syms, self->free_sym[k], n)))
            goto fallback;
    }

    /* 4. filled-in lengths, in dependency order */
    for (int k = 0; k < self->nfill; k++) {
        int i = self->fill_order[k];
        const tfb_param *p = &self->params[i];
        int64_t v;
        if (p->fill == TFB_FILL_DIM) {
            if (!tfb_dim_value(&p->fill_dim, &syms, &v))
                goto fallback;
        } else {
            const tfb_param *src = &self->params[p->fill_numel];
            if (src->role == TFB_OUT) {
                v = 1;
                for (int d = 0; d < src->rank; d++) {
                    int64_t n;
                    if (!tfb_dim_value(&src->dims[d], &syms, &n) || __builtin_mul_overflow(v, n, &v))
                        goto fallback;
                }
            } else {
                if (!arr[p->fill_numel].present)
                    goto fallback;
                v = arr[p->fill_numel].numel;
            }
        }
        fillv[i] = v;
        if (p->sym >= 0) {
            if (!tfb_bind(&syms, p->sym, v))
                goto fallback;
        } else if (p->alias < 0 && given[p->input] != NULL) {
            int64_t g;
            if (!tfb_size_of(given[p->input], &g) || g != v)
                goto fallback;
        }
    }

    /* 5. products of symbols, now that every symbol that can be known is */
    for (int i = 0; i < self->nparams; i++)
        if (arr[i].present && !tfb_products(&self->params[i], &arr[i], &syms))
            goto fallback;

    /* 6. written arrays must not share memory with another array argument */
    for (int i = 0; i < self->nparams; i++) {
        if (!arr[i].present || arr[i].nbytes == 0)
            continue;
        for (int j = i + 1; j < self->nparams; j++) {
            if (!arr[j].present || arr[j].nbytes == 0)
                continue;
            if (self->params[i].role == TFB_IN && self->params[j].role == TFB_IN)
                continue;
            if (arr[i].addr < arr[j].addr + arr[j].nbytes && arr[j].addr < arr[i].addr + arr[i].nbytes)
                goto fallback;
        }
    }

    /* 7. scalars */
    for (int i = 0; i < self->nparams; i++) {
        const tfb_param *p = &self->params[i];
        if (p->kind == TFB_FLOAT) {
            if (!tfb_float_arg(p, given[p->input], &slot[i]))
                goto fallback;
        } else if (p->kind == TFB_INT) {
            if (p->fill != TFB_FILL_NONE || p->sym >= 0) {
                int64_t v = p->fill != TFB_FILL_NONE ? fillv[i] : syms.val[p->sym];
                if (p->fill == TFB_FILL_NONE && !syms.known[p->sym])
                    goto fallback; /* a size nothing gives: "pass n=" */
                if (v < 0 || (uint64_t)v > p->hi)
                    goto fallback;
                slot[i].i = v;
            } else if (!tfb_int_arg(p, given[p->input], &slot[i])) {
                goto fallback;
            }
        }
    }

    /* 7b. lengths C takes from an integer argument: the array must hold that many */
    for (int i = 0; i < self->nparams; i++) {
        const tfb_param *p = &self->params[i];
        if (p->kind != TFB_ARRAY || p->min_len < 0 || !arr[i].present)
            continue;
        int64_t have = p->min_bytes ? arr[i].nbytes : arr[i].nbytes / tfb_dtypes[p->dtype].itemsize;
        const tfb_param *q = &self->params[p->min_len];
        if (p->min_len2 < 0) {
            if (q->is_unsigned ? slot[p->min_len].u > (uint64_t)have : slot[p->min_len].i > have)
                goto fallback; /* the Python path raises the ShapeError */
            continue;
        }
        /* a product (w * h): a factor that is not positive makes C access nothing */
        const tfb_param *q2 = &self->params[p->min_len2];
        uint64_t a = q->is_unsigned ? slot[p->min_len].u : (slot[p->min_len].i > 0 ? (uint64_t)slot[p->min_len].i : 0);
        uint64_t b = q2->is_unsigned ? slot[p->min_len2].u
                                     : (slot[p->min_len2].i > 0 ? (uint64_t)slot[p->min_len2].i : 0);
        uint64_t prod;
        if (a != 0 && b != 0 && (__builtin_mul_overflow(a, b, &prod) || prod > (uint64_t)have))
            goto fallback;
    }

    /* 8. outputs, in the kind of the first array argument given (torch by default) */
    int numpy_kind = 0;
    for (int i = 0; i < self->nparams; i++)
        if (arr[i].present) {
            numpy_kind = arr[i].numpy;
            break;
        }
    for (int i = 0; i < self->nparams; i++) {
        const tfb_param *p = &self->params[i];
        if (p->kind != TFB_ARRAY || p->role != TFB_OUT || arr[i].present)
            continue;
        int64_t shape[TFB_MAX_RANK];
        for (int k = 0; k < p->rank; k++)
            if (!tfb_dim_value(&p->dims[k], &syms, &shape[k]))
                goto fallback;
        PyObject *o = numpy_kind ? tfb_new_ndarray(p->dtype, p->rank, shape, &arr[i].addr)
                                 : tfb_new_tensor(p->dtype, p->rank, shape, &arr[i].addr);
        if (o == NULL) {
            if (tfb_decline() < 0)
                goto error;
            goto fallback; /* the Python path allocates (or explains why it cannot) */
        }
        arr[i].owned = arr[i].obj = o;
    }
    for (int i = 0; i < self->nparams; i++)
        if (self->params[i].kind == TFB_ARRAY)
            slot[i].p = arr[i].addr;

    /* 9. the C call */
    tfb_slot ret;
    ret.i = 0;
    if (self->tramp != NULL) {
        Py_BEGIN_ALLOW_THREADS
        self->tramp(slot, &ret);
        Py_END_ALLOW_THREADS
    } else if (self->gen_fn != NULL) {
        Py_BEGIN_ALLOW_THREADS
        tfb_generic_call(self, slot, &ret);
        Py_END_ALLOW_THREADS
    } else {
        PyObject *pargs[TFB_MAX_PARAMS];
        for (int i = 0; i < self->nparams; i++) {
            const tfb_param *p = &self->params[i];
            pargs[i] = p->kind == TFB_ARRAY   ? PyLong_FromVoidPtr(slot[i].p)
                       : p->kind == TFB_FLOAT ? PyFloat_FromDouble(p->bits == 32 ? (double)slot[i].f : slot[i].d)
                       : p->is_unsigned       ? PyLong_FromUnsignedLongLong(slot[i].u)
                                              : PyLong_FromLongLong(slot[i].i);
            if (pargs[i] == NULL) {
                for (int j = 0; j < i; j++)
                    Py_DECREF(pargs[j]);
                goto error;
            }
        }
        PyObject *r = PyObject_Vectorcall(self->pyfunc, pargs, (size_t)self->nparams, NULL);
        for (int i = 0; i < self->nparams; i++)
            Py_DECREF(pargs[i]);
        if (r == NULL)
            goto error;
        if (self->returns == TFB_RET_STATUS || self->returns == TFB_RET_COUNT) {
            ret.i = PyLong_AsLongLong(r);
            Py_DECREF(r);
            if (ret.i == -1 && PyErr_Occurred())
                goto error;
        } else if (self->returns == TFB_RET_VALUE) {
            ret.p = r; /* the cffi result, as cffi converted it */
        } else {
            Py_DECREF(r);
        }
    }

    /* 10. after the call: version counters, status, results */
    PyObject *bumped = NULL;
    int nw = 0;
    for (int i = 0; i < self->nparams; i++)
        nw += arr[i].present && arr[i].written_tensor;
    if (nw) {
        bumped = PyTuple_New(nw);
        if (bumped == NULL)
            goto error_value;
        for (int i = 0, k = 0; i < self->nparams; i++)
            if (arr[i].present && arr[i].written_tensor) {
                Py_INCREF(arr[i].obj);
                PyTuple_SET_ITEM(bumped, k++, arr[i].obj);
            }
        PyObject *r = PyObject_CallOneArg(cfg.bump, bumped);
        Py_DECREF(bumped);
        if (r == NULL)
            goto error_value;
        Py_DECREF(r);
    }
    for (int i = 0; i < self->nparams; i++)
        Py_CLEAR(arr[i].storage);
    if ((self->returns == TFB_RET_STATUS && ret.i != 0) || (self->returns == TFB_RET_COUNT && ret.i < 0)) {
        PyObject *code = PyLong_FromLongLong(ret.i);
        PyObject *r = code == NULL ? NULL : PyObject_CallOneArg(self->raise_status, code);
        Py_XDECREF(code);
        Py_XDECREF(r);
        if (r != NULL)
            PyErr_SetString(PyExc_SystemError, "tensorffi: raise_status returned");
        goto error;
    }
    PyObject *value = NULL;
    int nout = 0;
    if (self->returns == TFB_RET_COUNT) {
        value = PyLong_FromLongLong(ret.i);
    } else if (self->returns == TFB_RET_VALUE && (self->flags & TFB_KERNEL)) {
        value = tfb_value_tensor(self, ret); /* an operator's result: a 0-d tensor */
    } else if (self->returns == TFB_RET_VALUE) {
        value = (self->tramp != NULL || self->gen_fn != NULL) ? tfb_result(self, ret) : (PyObject *)ret.p;
    }
    if ((self->returns == TFB_RET_COUNT || self->returns == TFB_RET_VALUE) && value == NULL)
        goto error;
    for (int i = 0; i < self->nparams; i++)
        nout += self->params[i].kind == TFB_ARRAY && self->params[i].role == TFB_OUT;
    if (nout == 0) {
        tfb_release(self, arr, hidden);
        if (value == NULL)
            Py_RETURN_NONE;
        return value;
    }
    int n = nout + (value != NULL);
    PyObject *res = NULL;
    if (n > 1) {
        res = PyTuple_New(n);
        if (res == NULL) {
            Py_XDECREF(value);
            goto error;
        }
    }
    /* the C result first, then the outputs; an operator: the outputs, then its result */
    int k = 0, value_at = (self->flags & TFB_KERNEL) ? nout : 0;
    if (value != NULL && value_at == 0)
        PyTuple_SET_ITEM(res, k++, value);
    for (int i = 0; i < self->nparams; i++) {
        if (self->params[i].kind != TFB_ARRAY || self->params[i].role != TFB_OUT)
            continue;
        Py_INCREF(arr[i].obj);
        if (res == NULL) {
            res = arr[i].obj;
        } else {
            PyTuple_SET_ITEM(res, k++, arr[i].obj);
        }
    }
    if (value != NULL && value_at != 0)
        PyTuple_SET_ITEM(res, k++, value);
    tfb_release(self, arr, hidden);
    return res;

error_value:
    if (self->tramp == NULL && self->gen_fn == NULL && self->returns == TFB_RET_VALUE)
        Py_XDECREF((PyObject *)ret.p);
error:
    tfb_release(self, arr, hidden);
    return NULL;
fallback:
    tfb_release(self, arr, hidden);
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

/* ------------------------------------------------------------------------ */
/* The NativeCall type                                                        */
/* ------------------------------------------------------------------------ */

static int tfb_read_dim(const int64_t *w, Py_ssize_t n, Py_ssize_t *at, tfb_dim *d, int nsym) {
    if (*at + 2 > n)
        return 0;
    d->factor = w[(*at)++];
    int64_t k = w[(*at)++];
    if (k < 0 || k > TFB_MAX_DIMSYMS || d->factor < (k > 0 ? 1 : 0) || *at + k > n)
        return 0;
    d->nsym = (int)k;
    for (int j = 0; j < d->nsym; j++) {
        int64_t s = w[(*at)++];
        if (s < 0 || s >= nsym)
            return 0;
        d->sym[j] = (int)s;
    }
    return 1;
}

/* Decodes the description written by tensorffi/_bridge/lower.py (`encode`). */
static int tfb_decode(NativeCall *self, const int64_t *w, Py_ssize_t n) {
    Py_ssize_t at = 13;
    if (n < at || w[0] != TFB_VERSION)
        return 0;
    int64_t np_ = w[1], ns = w[2], ni = w[3], npos = w[4], nfree = w[8], nfill = w[9], nreq = w[10], nh = w[11];
    if (np_ < 0 || np_ > TFB_MAX_PARAMS || ns < 0 || ns > TFB_MAX_SYMS || ni < 0 || ni > TFB_MAX_INPUTS ||
        npos < 0 || npos > ni || nreq < 0 || nreq > npos || nfree < 0 || nfree > TFB_MAX_SYMS || nfill < 0 ||
        nfill > np_ || nh < 0 || nh > TFB_MAX_HIDDEN || w[5] < TFB_RET_NONE || w[5] > TFB_RET_VALUE ||
        w[6] < TFB_RES_VOID || w[6] > TFB_RES_BOOL || (w[7] & ~(int64_t)TFB_KERNEL) || w[12] < 0 ||
        w[12] >= TFB_NDTYPES)
        return 0;
    self->flags = (int)w[7];
    self->nreq = (int)nreq;
    self->nhidden = (int)nh;
    self->value_code = (int)w[12];
    self->nparams = (int)np_;
    self->nsym = (int)ns;
    self->ninputs = (int)ni;
    self->npos = (int)npos;
    self->returns = (int)w[5];
    self->result = (int)w[6];
    self->nfree = (int)nfree;
    self->nfill = (int)nfill;
    self->params = PyMem_Calloc((size_t)(np_ > 0 ? np_ : 1), sizeof(tfb_param));
    if (self->params == NULL)
        return -1;
    for (int i = 0; i < self->nparams; i++) {
        tfb_param *p = &self->params[i];
        if (at + 2 > n)
            return 0;
        p->kind = (int)w[at++];
        int64_t input = w[at++];
        if (input < 0 || input >= ni)
            return 0;
        p->input = (int)input;
        p->sym = p->alias = -1;
        if (p->kind == TFB_ARRAY) {
            if (at + 7 > n)
                return 0;
            int64_t dt = w[at++], role = w[at++], opt = w[at++], rank = w[at++], min_len = w[at++];
            int64_t min_len2 = w[at++], min_bytes = w[at++];
            if (dt < 0 || dt >= TFB_NDTYPES || role < TFB_IN || role > TFB_INOUT || rank < -1 || rank > TFB_MAX_RANK)
                return 0;
            if (min_len < -1 || min_len >= np_ || min_len2 < -1 || min_len2 >= np_ || (min_len < 0 && min_len2 >= 0))
                return 0;
            p->min_len = (int)min_len;
            p->min_len2 = (int)min_len2;
            p->min_bytes = min_bytes != 0;
            if (role == TFB_OUT && (dt == 0 || rank < 0))
                return 0;
            p->dtype = (int)dt;
            p->role = (int)role;
            p->optional = opt != 0;
            p->rank = (int)rank;
            for (int k = 0; k < p->rank; k++)
                if (!tfb_read_dim(w, n, &at, &p->dims[k], self->nsym))
                    return 0;
        } else if (p->kind == TFB_INT) {
            if (at + 7 > n)
                return 0;
            p->is_unsigned = w[at++] != 0;
            p->lo = w[at++];
            p->hi = (uint64_t)w[at++];
            int64_t sym = w[at++], alias = w[at++], fill = w[at++], numel = w[at++];
            if (sym < -1 || sym >= ns || alias < -1 || alias >= ns || fill < TFB_FILL_NONE || fill > TFB_FILL_NUMEL)
                return 0;
            p->sym = (int)sym;
            p->alias = (int)alias;
            p->fill = (int)fill;
            if (fill == TFB_FILL_DIM && !tfb_read_dim(w, n, &at, &p->fill_dim, self->nsym))
                return 0;
            if (fill == TFB_FILL_NUMEL) {
                if (numel < 0 || numel >= np_)
                    return 0;
                p->fill_numel = (int)numel;
            }
        } else if (p->kind == TFB_FLOAT) {
            if (at + 1 > n)
                return 0;
            p->bits = (int)w[at++];
            if (p->bits != 32 && p->bits != 64)
                return 0;
        } else {
            return 0;
        }
    }
    for (int k = 0; k < self->nfree; k++) {
        if (at + 2 > n || w[at] < 0 || w[at] >= ni || w[at + 1] < 0 || w[at + 1] >= ns)
            return 0;
        self->free_input[k] = (int)w[at++];
        self->free_sym[k] = (int)w[at++];
    }
    for (int k = 0; k < self->nfill; k++) {
        if (at + 1 > n || w[at] < 0 || w[at] >= np_ || self->params[w[at]].kind != TFB_INT ||
            self->params[w[at]].fill == TFB_FILL_NONE)
            return 0;
        self->fill_order[k] = (int)w[at++];
    }
    for (int k = 0; k < self->nhidden; k++) {
        if (at + 1 > n || w[at] < npos || w[at] >= ni)
            return 0;
        self->hidden_input[k] = (int)w[at++];
    }
    for (int i = 0; i < self->nparams; i++) /* a length C takes names an integer */
        if (self->params[i].kind == TFB_ARRAY && ((self->params[i].min_len >= 0 &&
            self->params[self->params[i].min_len].kind != TFB_INT) || (self->params[i].min_len2 >= 0 &&
            self->params[self->params[i].min_len2].kind != TFB_INT)))
            return 0;
    for (int i = 0; i < self->nparams; i++) /* a numel fill names an array */
        if (self->params[i].kind == TFB_INT && self->params[i].fill == TFB_FILL_NUMEL &&
            self->params[self->params[i].fill_numel].kind != TFB_ARRAY)
            return 0;
    return at == n;
}

static int nc_traverse(NativeCall *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict);
    Py_VISIT(self->names);
    Py_VISIT(self->pyfunc);
    Py_VISIT(self->fallback);
    Py_VISIT(self->raise_status);
    Py_VISIT(self->keep);
    Py_VISIT(self->hidden);
    Py_VISIT(self->guard);
    Py_VISIT(self->grad_enabled);
    Py_VISIT(self->cxx_raise);
    Py_VISIT(self->cxx_keep);
    Py_VISIT(self->first_call);
    return 0;
}

static int nc_clear(NativeCall *self) {
    Py_CLEAR(self->dict);
    Py_CLEAR(self->names);
    Py_CLEAR(self->pyfunc);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->raise_status);
    Py_CLEAR(self->keep);
    Py_CLEAR(self->hidden);
    Py_CLEAR(self->guard);
    Py_CLEAR(self->grad_enabled);
    Py_CLEAR(self->cxx_raise);
    Py_CLEAR(self->cxx_keep);
    Py_CLEAR(self->first_call);
    self->cxx_pending = NULL;
    return 0;
}

static void nc_dealloc(NativeCall *self) {
    PyObject_GC_UnTrack(self);
    nc_clear(self);
    PyMem_Free(self->params);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* NativeCall(spec: bytes, names: tuple[str], trampoline: int, pyfunc, fallback, raise_status, keep,
 *            kernel: (hidden callables, guard, torch.is_grad_enabled) | None,
 *            generic: (address: int, classes: bytes, result: bytes) | None) */
static PyObject *nc_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *spec, *names, *tramp, *pyfunc, *fallback, *raise_status, *keep, *kernel = Py_None, *generic = Py_None;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "NativeCall() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "SO!OOOOO|OO:NativeCall", &spec, &PyTuple_Type, &names, &tramp, &pyfunc, &fallback,
                          &raise_status, &keep, &kernel, &generic))
        return NULL;
    if (!cfg.torch_ok && !cfg.numpy_ok) {
        PyErr_SetString(PyExc_RuntimeError, "the native bridge is not configured");
        return NULL;
    }
    NativeCall *self = (NativeCall *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = nc_vectorcall;
    Py_ssize_t nbytes = PyBytes_GET_SIZE(spec);
    int ok = 0;
    if (nbytes % (Py_ssize_t)sizeof(int64_t) == 0) {
        int64_t *words = PyMem_Malloc(nbytes > 0 ? (size_t)nbytes : 1); /* aligned, unlike a bytes' text */
        if (words == NULL) {
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        memcpy(words, PyBytes_AS_STRING(spec), (size_t)nbytes);
        ok = tfb_decode(self, words, nbytes / 8);
        PyMem_Free(words);
    }
    if (ok <= 0) {
        if (ok == 0)
            PyErr_SetString(PyExc_ValueError, "NativeCall: malformed description (a tensorffi bug)");
        Py_DECREF(self);
        return NULL;
    }
    if (PyTuple_GET_SIZE(names) != self->ninputs) {
        PyErr_SetString(PyExc_ValueError, "NativeCall: one name per input expected");
        Py_DECREF(self);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->ninputs; i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "NativeCall: names must be str");
            Py_DECREF(self);
            return NULL;
        }
    self->tramp = (tfb_trampoline)PyLong_AsVoidPtr(tramp);
    if (PyErr_Occurred()) {
        Py_DECREF(self);
        return NULL;
    }
    if (generic != Py_None) {
        PyObject *addr;
        const char *classes, *result;
        Py_ssize_t nclasses, nresult;
        if (!PyArg_ParseTuple(generic, "Oy#y#:generic", &addr, &classes, &nclasses, &result, &nresult)) {
            Py_DECREF(self);
            return NULL;
        }
        void *fn = PyLong_AsVoidPtr(addr);
        if (PyErr_Occurred()) {
            Py_DECREF(self);
            return NULL;
        }
        int ni = 0, nf = 0, ok_classes = nclasses == self->nparams && nresult == 1 && fn != NULL && TFB_GENERIC;
        for (Py_ssize_t k = 0; ok_classes && k < nclasses; k++) {
            ni += classes[k] == 'i';
            nf += classes[k] == 'f' || classes[k] == 'd';
            ok_classes = classes[k] == 'i' || classes[k] == 'f' || classes[k] == 'd';
        }
#if TFB_GENERIC
        ok_classes = ok_classes && ni <= TFB_GINT && nf <= TFB_GSSE && result[0] != 0 && strchr("vbBhHiIqQ?fd", result[0]) != NULL;
#endif
        if (!ok_classes || self->tramp != NULL || (self->flags & TFB_KERNEL)) {
            PyErr_SetString(PyExc_ValueError, "NativeCall: a generic call this platform or signature cannot make");
            Py_DECREF(self);
            return NULL;
        }
        memcpy(self->gen_class, classes, (size_t)nclasses);
        self->gen_result = result[0];
        memcpy(&self->gen_fn, &fn, sizeof fn);
    }
    if (self->tramp == NULL && !PyCallable_Check(pyfunc)) {
        PyErr_SetString(PyExc_TypeError, "NativeCall: a trampoline or a callable is needed");
        Py_DECREF(self);
        return NULL;
    }
    /* Interned, as the keyword names of a call site are: found by pointer, not compared. */
    self->names = PyTuple_New(self->ninputs);
    if (self->names == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->ninputs; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);
        PyTuple_SET_ITEM(self->names, i, name);
    }
    Py_INCREF(pyfunc);
    self->pyfunc = pyfunc;
    Py_INCREF(fallback);
    self->fallback = fallback;
    Py_INCREF(raise_status);
    self->raise_status = raise_status;
    Py_INCREF(keep);
    self->keep = keep;
    if (self->flags & TFB_KERNEL) {
        PyObject *hidden, *guard, *enabled;
        if (!PyArg_ParseTuple(kernel, "O!OO:kernel", &PyTuple_Type, &hidden, &guard, &enabled)) {
            Py_DECREF(self);
            return NULL;
        }
        if (PyTuple_GET_SIZE(hidden) != self->nhidden) {
            PyErr_SetString(PyExc_ValueError, "NativeCall: one callable per hidden parameter expected");
            Py_DECREF(self);
            return NULL;
        }
        Py_INCREF(hidden);
        self->hidden = hidden;
        if (guard != Py_None) {
            Py_INCREF(guard);
            self->guard = guard;
            Py_INCREF(enabled);
            self->grad_enabled = enabled;
        }
    } else if (self->nhidden) {
        PyErr_SetString(PyExc_ValueError, "NativeCall: hidden parameters are for operator kernels");
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* A C++ function's call: the call, then the exception its guard caught, if any (as
 * `try: call() finally: if pending: raise_pending()`; what the call raised, if
 * anything, becomes the new exception's __context__). One load when nothing threw. */
static PyObject *nc_vectorcall_cxx(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    NativeCall *self = (NativeCall *)callable;
    PyObject *r = nc_vectorcall(callable, args, nargsf, kwnames);
    if (__atomic_load_n(self->cxx_pending, __ATOMIC_ACQUIRE) == 0)
        return r;
    PyObject *et = NULL, *ev = NULL, *etb = NULL;
    if (r == NULL)
        PyErr_Fetch(&et, &ev, &etb);
    PyObject *x = PyObject_CallNoArgs(self->cxx_raise);
    if (x != NULL) { /* nothing of this thread's was pending (another thread's was) */
        Py_DECREF(x);
        if (r == NULL)
            PyErr_Restore(et, ev, etb);
        return r;
    }
    Py_XDECREF(r);
    if (et != NULL) {
        PyObject *nt, *nv, *ntb;
        PyErr_NormalizeException(&et, &ev, &etb);
        if (etb != NULL)
            PyException_SetTraceback(ev, etb);
        PyErr_Fetch(&nt, &nv, &ntb);
        PyErr_NormalizeException(&nt, &nv, &ntb);
        PyException_SetContext(nv, ev); /* steals ev */
        Py_DECREF(et);
        Py_XDECREF(etb);
        PyErr_Restore(nt, nv, ntb);
    }
    return NULL;
}

/* _cxx_guard(pending: int (the address of the module's int), raise_pending, keep): calls
 * of a C++ module raise what its guards caught (tensorffi._calls.finish). */
static PyObject *nc_cxx_guard(NativeCall *self, PyObject *args) {
    PyObject *addr, *raise_fn, *keep;
    if (!PyArg_ParseTuple(args, "O!OO:_cxx_guard", &PyLong_Type, &addr, &raise_fn, &keep))
        return NULL;
    void *p = PyLong_AsVoidPtr(addr);
    if (p == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "_cxx_guard: a NULL address");
        return NULL;
    }
    if (!PyCallable_Check(raise_fn)) {
        PyErr_SetString(PyExc_TypeError, "_cxx_guard: raise_pending must be callable");
        return NULL;
    }
    Py_INCREF(raise_fn);
    Py_INCREF(keep);
    Py_XSETREF(self->cxx_raise, raise_fn);
    Py_XSETREF(self->cxx_keep, keep);
    self->cxx_pending = (const int *)p;
    if (self->first_call != NULL)
        self->after_first = nc_vectorcall_cxx; /* the first call's hook still runs first */
    else
        self->vectorcall = nc_vectorcall_cxx;
    Py_RETURN_NONE;
}

/* The first call runs `first_call()` (a warning; under -W error an error, and then the
 * next call asks again), then every call goes straight to the call it replaced:
 * nothing is paid after it. */
static PyObject *nc_vectorcall_first(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    NativeCall *self = (NativeCall *)callable;
    PyObject *hook = self->first_call;
    if (hook != NULL) {
        Py_INCREF(hook);
        PyObject *r = PyObject_CallNoArgs(hook);
        if (r == NULL) { /* an error (-W error): the next call asks again */
            Py_DECREF(hook);
            return NULL;
        }
        Py_DECREF(r);
        if (self->first_call == hook) { /* (another thread's first call may have cleared it) */
            self->vectorcall = self->after_first;
            Py_CLEAR(self->first_call);
        }
        Py_DECREF(hook);
    }
    return self->after_first(callable, args, nargsf, kwnames);
}

/* _first_call(fn): fn() runs before the first call (tensorffi.bridge: UncheckedWarning). */
static PyObject *nc_set_first_call(NativeCall *self, PyObject *fn) {
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "_first_call: expected a callable");
        return NULL;
    }
    if (self->first_call == NULL) {
        self->after_first = self->vectorcall;
        self->vectorcall = nc_vectorcall_first;
    }
    Py_INCREF(fn);
    Py_XSETREF(self->first_call, fn);
    Py_RETURN_NONE;
}

static PyMethodDef nc_methods[] = {
    {"_cxx_guard", (PyCFunction)nc_cxx_guard, METH_VARARGS,
     "Raise, after each call, the C++ exception the module's guard caught (tensorffi._calls)."},
    {"_first_call", (PyCFunction)nc_set_first_call, METH_O,
     "Run fn() once, before the first call (tensorffi.UncheckedWarning)."},
    {NULL, NULL, 0, NULL},
};

static PyObject *nc_repr(NativeCall *self) {
    PyObject *name = self->dict != NULL ? PyDict_GetItemString(self->dict, "__name__") : NULL;
    if (name != NULL)
        return PyUnicode_FromFormat("<tensorffi bound function %S>", name);
    return PyUnicode_FromString("<tensorffi bound function>");
}

static PyObject *nc_get_native(PyObject *self, void *closure) {
    (void)self;
    (void)closure;
    Py_RETURN_TRUE;
}

static PyGetSetDef nc_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"__native__", nc_get_native, NULL, "True: this function runs the bridge's native call path.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject NativeCall_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tensorffi._native.NativeCall",
    .tp_basicsize = sizeof(NativeCall),
    .tp_dealloc = (destructor)nc_dealloc,
    .tp_vectorcall_offset = offsetof(NativeCall, vectorcall),
    .tp_repr = (reprfunc)nc_repr,
    .tp_call = PyVectorcall_Call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A C function bound through the bridge, called through its native path.",
    .tp_traverse = (traverseproc)nc_traverse,
    .tp_clear = (inquiry)nc_clear,
    .tp_getset = nc_getset,
    .tp_methods = nc_methods,
    .tp_dictoffset = offsetof(NativeCall, dict),
    .tp_new = nc_new,
};

/* ------------------------------------------------------------------------ */
/* Configuration                                                              */
/* ------------------------------------------------------------------------ */

static int tfb_set_attr(tfb_attr *a, PyObject *descr) {
    if (Py_IS_TYPE(descr, &PyGetSetDescr_Type)) {
        a->getset = ((PyGetSetDescrObject *)descr)->d_getset;
    } else if (Py_IS_TYPE(descr, &PyMethodDescr_Type)) {
        PyMethodDef *md = ((PyMethodDescrObject *)descr)->d_method;
        if ((md->ml_flags & ~METH_COEXIST) == METH_NOARGS)
            a->noargs = md->ml_meth;
    } else if (!PyCallable_Check(descr)) {
        PyErr_SetString(PyExc_TypeError, "bridge_configure: an attribute is neither a descriptor nor callable");
        return 0;
    }
    Py_INCREF(descr);
    a->descr = descr;
    return 1;
}

/* bridge_configure(torch_facts: tuple | None, numpy_facts: tuple | None) -> (torch_ok, numpy_ok)
 *
 * torch_facts = (Tensor, Parameter, UntypedStorage, capsule, is_neg, is_conj,
 *                untyped_storage, storage.data_ptr, requires_grad, _version, _increment_version,
 *                is_grad_enabled, readonly.overlaps)
 *   where the attributes are the descriptors Tensor and Parameter resolve (checked in Python);
 * numpy_facts = (ndarray, empty, dtypes: tuple[dtype | None], nums: tuple[tuple[int, ...]],
 *                native byte-order char, probe array,
 *                (data, nd, dims, strides, flags, type_num, base)). */
static PyObject *bridge_configure(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *tf, *nf;
    if (!PyArg_ParseTuple(args, "OO:bridge_configure", &tf, &nf))
        return NULL;
    /* Each part once per process (the module's state is written once): NumPy's at the
     * first bound function, torch's once torch has been imported (maybe much later;
     * NativeCall objects made before read tensors from then on). */
    if (tf != Py_None && !cfg.torch_ok) {
        PyObject *tensor, *param, *storage, *cap, *neg, *conj, *ust, *sdp, *rg, *ver, *bump, *ge, *rof;
        if (!PyArg_ParseTuple(tf, "O!O!O!OOOOOOOOOO:torch facts", &PyType_Type, &tensor, &PyType_Type, &param,
                              &PyType_Type, &storage, &cap, &neg, &conj, &ust, &sdp, &rg, &ver, &bump, &ge, &rof))
            return NULL;
        const tfb_ExchangeAPI *api = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
        if (api == NULL)
            return NULL;
        if (api->header.version.major != 1 || api->header.version.minor < 3 ||
            api->dltensor_from_py_object_no_sync == NULL || api->managed_tensor_to_py_object_no_sync == NULL) {
            PyErr_Format(PyExc_RuntimeError, "DLPack exchange API %u.%u: this bridge needs 1.3 or a later 1.x",
                         api->header.version.major, api->header.version.minor);
            return NULL;
        }
        if (!tfb_set_attr(&cfg.is_neg, neg) || !tfb_set_attr(&cfg.is_conj, conj) ||
            !tfb_set_attr(&cfg.untyped_storage, ust) || !tfb_set_attr(&cfg.storage_data_ptr, sdp) ||
            !tfb_set_attr(&cfg.requires_grad, rg) || !tfb_set_attr(&cfg.version, ver))
            return NULL;
        cfg.api = api;
        Py_INCREF(cap); /* the table lives while the capsule does: keep it */
        Py_INCREF(tensor);
        Py_INCREF(param);
        Py_INCREF(storage);
        Py_INCREF(bump);
        Py_INCREF(ge);
        Py_INCREF(rof);
        cfg.grad_enabled = ge;
        if (PyCFunction_Check(ge) && (PyCFunction_GET_FLAGS(ge) & ~METH_COEXIST) == METH_NOARGS) {
            cfg.grad_fn = PyCFunction_GET_FUNCTION(ge);
            cfg.grad_self = PyCFunction_GET_SELF(ge);
        }
        cfg.readonly_find = rof;
        cfg.tensor_type = (PyTypeObject *)tensor;
        cfg.parameter_type = (PyTypeObject *)param;
        cfg.storage_type = (PyTypeObject *)storage;
        cfg.bump = bump;
        cfg.torch_ok = 1;
    }
    if (nf != Py_None && !cfg.numpy_ok) {
        PyObject *nd, *empty, *dtypes, *nums, *probe, *facts;
        int native;
        if (!PyArg_ParseTuple(nf, "O!OO!O!COO!:numpy facts", &PyType_Type, &nd, &empty, &PyTuple_Type, &dtypes,
                              &PyTuple_Type, &nums, &native, &probe, &PyTuple_Type, &facts))
            return NULL;
        if (PyTuple_GET_SIZE(dtypes) != TFB_NDTYPES || PyTuple_GET_SIZE(nums) != TFB_NDTYPES) {
            PyErr_SetString(PyExc_ValueError, "bridge_configure: one NumPy dtype per element type expected");
            return NULL;
        }
        for (int c = 0; c < TFB_NDTYPES; c++) {
            PyObject *row = PyTuple_GET_ITEM(nums, c);
            for (int k = 0; k < TFB_NUMS; k++)
                cfg.np_nums[c][k] = -1;
            if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) > TFB_NUMS) {
                PyErr_SetString(PyExc_ValueError, "bridge_configure: bad NumPy type numbers");
                return NULL;
            }
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(row); k++)
                cfg.np_nums[c][k] = (int)PyLong_AsLong(PyTuple_GET_ITEM(row, k));
            if (PyErr_Occurred())
                return NULL;
        }
        /* The probe: the struct fields read here must say what NumPy says. */
        long long pdata, pnd, pflags, pnum;
        PyObject *pdims, *pstrides, *pbase;
        if (!PyArg_ParseTuple(facts, "LLO!O!LLO:probe facts", &pdata, &pnd, &PyTuple_Type, &pdims, &PyTuple_Type,
                              &pstrides, &pflags, &pnum, &pbase))
            return NULL;
        int agree = Py_TYPE(probe) == (PyTypeObject *)nd;
        const tfb_ndarray *pa = (const tfb_ndarray *)probe;
        if (agree)
            agree = (long long)(intptr_t)pa->data == pdata && pa->nd == pnd && PyTuple_GET_SIZE(pdims) == pnd &&
                    PyTuple_GET_SIZE(pstrides) == pnd && pa->base == pbase &&
                    (pa->flags & (TFB_NPY_C_CONTIGUOUS | TFB_NPY_ALIGNED | TFB_NPY_WRITEABLE)) == pflags &&
                    ((const tfb_descr *)pa->descr)->type_num == pnum;
        for (int k = 0; agree && k < pa->nd; k++)
            agree = pa->dimensions[k] == PyLong_AsSsize_t(PyTuple_GET_ITEM(pdims, k)) &&
                    pa->strides[k] == PyLong_AsSsize_t(PyTuple_GET_ITEM(pstrides, k));
        if (PyErr_Occurred())
            return NULL;
        if (agree) {
            for (int c = 0; c < TFB_NDTYPES; c++) {
                PyObject *d = PyTuple_GET_ITEM(dtypes, c);
                cfg.np_dtype[c] = d == Py_None ? NULL : d;
                Py_XINCREF(cfg.np_dtype[c]);
            }
            Py_INCREF(nd);
            Py_INCREF(empty);
            cfg.ndarray_type = (PyTypeObject *)nd;
            cfg.np_empty = empty;
            cfg.np_native = (char)native;
            cfg.numpy_ok = 1;
        }
    }
    return Py_BuildValue("(ii)", cfg.torch_ok, cfg.numpy_ok);
}

/* bridge_dtypes() -> tuple of the element type names, in the order of their codes. */
static PyObject *bridge_dtypes(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    PyObject *t = PyTuple_New(TFB_NDTYPES);
    for (int c = 0; t != NULL && c < TFB_NDTYPES; c++) {
        PyObject *s = PyUnicode_FromString(tfb_dtypes[c].name);
        if (s == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, c, s);
    }
    return t;
}

/* bridge_limits() -> dict of the description's limits (the lowering refuses what exceeds them). */
static PyObject *bridge_limits(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    return Py_BuildValue("{sisisisisisisisisi}", "version", TFB_VERSION, "params", TFB_MAX_PARAMS, "symbols",
                         TFB_MAX_SYMS, "rank", TFB_MAX_RANK, "dim_symbols", TFB_MAX_DIMSYMS, "inputs", TFB_MAX_INPUTS,
                         "generic", TFB_GENERIC, "generic_int", TFB_GENERIC ? 6 : 0, "generic_sse",
                         TFB_GENERIC ? 8 : 0);
}

/* bridge_tensor_copy(array, dtype_code, shape) -> a new torch tensor of `shape` holding a
 * copy of the first prod(shape) elements of a C-contiguous NumPy array, as element type
 * `dtype_code` (of the array's item size: a uint16 array becomes float16 or bfloat16).
 * The tensor's memory is the bridge's own (tfb_new_tensor): for small results, a third
 * of what trimming the array and torch.from_numpy cost. */
static PyObject *bridge_tensor_copy(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3 || !cfg.torch_ok || !cfg.numpy_ok || Py_TYPE(args[0]) != cfg.ndarray_type ||
        !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "bridge_tensor_copy(ndarray, dtype code, shape) needs the native bridge");
        return NULL;
    }
    const tfb_ndarray *arr = (const tfb_ndarray *)args[0];
    long code = PyLong_AsLong(args[1]);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    int from = tfb_np_dtype_code(((const tfb_descr *)arr->descr)->type_num);
    Py_ssize_t rank = PyTuple_GET_SIZE(args[2]);
    if (code < 1 || code >= TFB_NDTYPES || from < 0 || tfb_dtypes[from].itemsize != tfb_dtypes[code].itemsize ||
        rank > TFB_MAX_RANK || !(arr->flags & TFB_NPY_C_CONTIGUOUS)) {
        PyErr_SetString(PyExc_ValueError, "bridge_tensor_copy: a C-contiguous array of that item size expected");
        return NULL;
    }
    int64_t shape[TFB_MAX_RANK] = {0}, numel = 1, have = 1;
    for (int k = 0; k < arr->nd; k++)
        have *= arr->dimensions[k];
    for (Py_ssize_t k = 0; k < rank; k++) {
        shape[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(args[2], k));
        if (shape[k] < 0 || __builtin_mul_overflow(numel, shape[k], &numel)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "bridge_tensor_copy: a bad shape");
            return NULL;
        }
    }
    if (numel > have) {
        PyErr_SetString(PyExc_ValueError, "bridge_tensor_copy: the shape holds more elements than the array");
        return NULL;
    }
    char *addr = NULL;
    PyObject *t = tfb_new_tensor((int)code, (int)rank, shape, &addr);
    if (t == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return NULL;
    }
    if (numel > 0)
        memcpy(addr, arr->data, (size_t)(numel * tfb_dtypes[code].itemsize));
    return t;
}

/* bridge_contents(array) -> (dtype code, shape, bytes), or None: the values of a small
 * torch tensor or NumPy array, read with the checks of an argument C reads (CPU,
 * contiguous, memory that holds its values); None for anything else. A content key for
 * caches of derived data (a filter's coefficients in float64) that never goes stale. */
static PyObject *bridge_contents(PyObject *module, PyObject *obj) {
    (void)module;
    tfb_param p;
    memset(&p, 0, sizeof p);
    p.rank = -1;
    tfb_arr a;
    memset(&a, 0, sizeof a);
    /* grad_ok: the values are read by no C function (a cache key), so a tensor that
     * requires grad is as good as its detached self */
    int r = tfb_read_array(obj, &p, &a, 1, NULL);
    if (r < 0)
        return NULL;
    PyObject *out = NULL;
    if (r > 0 && a.ndim <= TFB_MAX_RANK && a.code > 0) {
        PyObject *shape = PyTuple_New(a.ndim);
        for (int k = 0; shape != NULL && k < a.ndim; k++) {
            PyObject *n = PyLong_FromLongLong(a.shape[k]);
            if (n == NULL)
                Py_CLEAR(shape);
            else
                PyTuple_SET_ITEM(shape, k, n);
        }
        PyObject *data = shape == NULL ? NULL : PyBytes_FromStringAndSize(a.addr, (Py_ssize_t)a.nbytes);
        if (data != NULL)
            out = Py_BuildValue("(iNN)", a.code, shape, data);
        else
            Py_XDECREF(shape);
        if (out == NULL) {
            Py_CLEAR(a.storage);
            return NULL;
        }
    }
    Py_CLEAR(a.storage);
    if (out == NULL)
        Py_RETURN_NONE;
    return out;
}

/* bridge_read(obj, dtype_code, written, grad_ok) -> (address, nbytes, shape, holder, is_numpy) or None:
 * the native path's rule for an argument C may use as it is, for the Python path's
 * own calls (functions the native path does not run: handles, structs, callbacks...).
 * `holder` (the torch storage, or the array) must be held until C returns. None: the
 * Python path's general preparation decides (it explains, or copies). */
static PyObject *bridge_read(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "bridge_read(obj, dtype_code, written, grad_ok)");
        return NULL;
    }
    tfb_param p;
    memset(&p, 0, sizeof p);
    long code = PyLong_AsLong(args[1]);
    int written = PyObject_IsTrue(args[2]), grad_ok = PyObject_IsTrue(args[3]);
    if ((code == -1 && PyErr_Occurred()) || written < 0 || grad_ok < 0)
        return NULL;
    if (code < 0 || code >= TFB_NDTYPES) {
        PyErr_SetString(PyExc_ValueError, "bridge_read: unknown dtype code");
        return NULL;
    }
    p.dtype = (int)code;
    p.role = written ? TFB_INOUT : TFB_IN;
    p.rank = -1;
    tfb_arr a;
    memset(&a, 0, sizeof a);
    int grad_mode = -1;
    int r = tfb_read_array(args[0], &p, &a, grad_ok, &grad_mode);
    if (r < 0)
        return NULL;
    if (r == 0 || a.ndim > TFB_MAX_RANK) {
        Py_XDECREF(a.storage);
        Py_RETURN_NONE;
    }
    PyObject *shape = PyTuple_New(a.ndim);
    for (int k = 0; shape != NULL && k < a.ndim; k++) {
        PyObject *n = PyLong_FromLongLong(a.shape[k]);
        if (n == NULL)
            Py_CLEAR(shape);
        else
            PyTuple_SET_ITEM(shape, k, n);
    }
    PyObject *holder = a.storage != NULL ? a.storage : args[0];
    if (a.storage == NULL)
        Py_INCREF(holder);
    if (shape == NULL) {
        Py_DECREF(holder);
        return NULL;
    }
    return Py_BuildValue("(NLNNO)", PyLong_FromVoidPtr(a.addr), (long long)a.nbytes, shape, holder,
                         a.numpy ? Py_True : Py_False);
}

/* bridge_readonly_count(n): how many read-only buffers torch tensors view now (see
 * cfg.readonly_find); called by tensorffi._bridge.readonly whenever that changes. */
static PyObject *bridge_readonly_count(PyObject *module, PyObject *n) {
    (void)module;
    long long v = PyLong_AsLongLong(n);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    __atomic_store_n(&cfg.readonly_count, (int64_t)v, __ATOMIC_RELEASE);
    Py_RETURN_NONE;
}

static PyMethodDef tfb_functions[] = {
    {"bridge_readonly_count", bridge_readonly_count, METH_O, "How many read-only buffers torch tensors view now."},
    {"bridge_read", (PyCFunction)(void (*)(void))bridge_read, METH_FASTCALL,
     "The native path's reading of one argument, for the Python path (None: not as it is)."},
    {"bridge_contents", bridge_contents, METH_O, "(dtype code, shape, bytes) of a small array, or None."},
    {"bridge_tensor_copy", (PyCFunction)(void (*)(void))bridge_tensor_copy, METH_FASTCALL,
     "A new torch tensor holding a copy of a C-contiguous NumPy array."},
    {"bridge_configure", bridge_configure, METH_VARARGS, "Configure the native call path (once, at import)."},
    {"bridge_dtypes", bridge_dtypes, METH_NOARGS, "Element type names in the order of their codes."},
    {"bridge_limits", bridge_limits, METH_NOARGS, "Limits of a lowered description."},
    {NULL, NULL, 0, NULL},
};

int tf_bridge_install(const char *module_name) {
    /* cffi released the GIL around this call: take it back while touching Python. */
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = TF_OK;
    PyObject *module = PyImport_AddModule(module_name); /* borrowed */
    if (module == NULL || PyType_Ready(&NativeCall_Type) < 0 ||
        PyModule_AddObjectRef(module, "NativeCall", (PyObject *)&NativeCall_Type) < 0 ||
        PyModule_AddFunctions(module, tfb_functions) < 0) {
        PyErr_Clear();
        rc = tf_error(TF_EINTERNAL, "tf_bridge_install: cannot add the bridge to module %s", module_name);
    }
    PyGILState_Release(gil);
    return rc;
}
