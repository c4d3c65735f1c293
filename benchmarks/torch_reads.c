/* SPDX-License-Identifier: MIT */
/* benchmarks/torch_reads.c — what each read of a torch tensor costs from C, the way
 * csrc/bridge_call.c makes it (built and run by `python benchmarks/bridge.py
 * --primitives`): the DLPack exchange call, is_neg() and untyped_storage() through their
 * method descriptors' C functions, the storage's size and address, requires_grad and
 * _version through their getters, torch._C._increment_version on a 1-tuple, and a GIL
 * release and re-acquisition. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct { void *data; DLDevice device; int32_t ndim; DLDataType dtype; int64_t *shape; int64_t *strides;
                 uint64_t byte_offset; } DLTensor;
typedef struct { uint32_t major, minor; } DLPackVersion;
typedef struct Header { DLPackVersion version; struct Header *prev; } Header;
typedef struct { Header header; void *alloc, *from, *to; int (*dltensor_from)(void *, DLTensor *); void *stream; } API;

static API *api;
static PyObject *descr[6], *bump;

static PyObject *attr(int i, PyObject *o) {
    if (Py_IS_TYPE(descr[i], &PyGetSetDescr_Type)) {
        PyGetSetDef *g = ((PyGetSetDescrObject *)descr[i])->d_getset;
        return g->get(o, g->closure);
    }
    return ((PyMethodDescrObject *)descr[i])->d_method->ml_meth(o, NULL);
}

/* setup(tensor, [is_neg, untyped_storage, storage.data_ptr, requires_grad, _version], _increment_version) */
static PyObject *setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *t, *list;
    if (!PyArg_ParseTuple(args, "OO!O", &t, &PyList_Type, &list, &bump))
        return NULL;
    PyObject *cap = PyObject_GetAttrString((PyObject *)Py_TYPE(t), "__dlpack_c_exchange_api__");
    if (cap == NULL)
        return NULL;
    api = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
    if (api == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list) && i < 6; i++) {
        descr[i] = PyList_GET_ITEM(list, i);
        Py_INCREF(descr[i]);
    }
    Py_INCREF(bump);
    Py_RETURN_NONE;
}

/* run(tensor, what, reps) -> seconds per rep */
static PyObject *run(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (n != 3)
        return NULL;
    PyObject *t = args[0];
    long what = PyLong_AsLong(args[1]), reps = PyLong_AsLong(args[2]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long r = 0; r < reps; r++) {
        PyObject *o = NULL;
        switch (what) {
        case 0: { DLTensor d; if (api->dltensor_from(t, &d)) return NULL; o = Py_NewRef(Py_None); break; }
        case 1: o = attr(0, t); break;
        case 2: { PyObject *st = attr(1, t); if (!st) return NULL; (void)PyObject_Size(st); o = attr(2, st);
                  Py_DECREF(st); break; }
        case 3: o = attr(3, t); break;
        case 4: o = attr(4, t); break;
        case 5: { PyObject *tup = PyTuple_Pack(1, t); o = PyObject_CallOneArg(bump, tup); Py_DECREF(tup); break; }
        case 6: { Py_BEGIN_ALLOW_THREADS Py_END_ALLOW_THREADS o = Py_NewRef(Py_None); break; }
        default: o = Py_NewRef(Py_None);
        }
        if (o == NULL)
            return NULL;
        Py_DECREF(o);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    return PyFloat_FromDouble(((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9) / (double)reps);
}

static PyMethodDef methods[] = {{"setup", setup, METH_VARARGS, NULL},
                                {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL, NULL},
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "torch_reads", NULL, -1, methods, NULL, NULL, NULL, NULL};
PyMODINIT_FUNC PyInit_torch_reads(void) { return PyModule_Create(&module); }
