/* The fast-loop risk model's forward pass in C: robot_rl.safety._mlp.forward.
 *
 * FastRiskModel (robot_rl/safety/fast_risk.py) calls this every tick of the safety node. In numpy the pass takes
 * about ten calls of ~2-4 us of interpreter overhead each (more than the arithmetic of a 128-wide layer); here it is
 * one call. The Python class stays the reference: tests/safety/test_fast_risk_native.py checks that both give the
 * same risks.
 *
 *     forward(layers, x, out, tanh) -> None
 *
 * layers: a tuple of float32 C-contiguous 2-D buffers, layer l of shape (in_l + 1, out_l): the weights, then the
 *         bias as the last row; in_(l+1) == out_l and the last out is 1.
 * x:      float32 C-contiguous 2-D buffer (rows, >= in_0): each row's first in_0 values are the input.
 * out:    float32 C-contiguous 1-D writable buffer (rows,): the risks, sigmoid of the last layer's output, computed
 *         as 0.5 + 0.5 tanh(0.5 logit) (no overflow).
 * tanh:   hidden activation tanh when true, else ReLU.
 *
 * Shapes that do not chain raise ValueError; nothing is written then.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYERS 8
#define MAX_WIDTH 1024

static int float_buffer(PyObject *object, Py_buffer *view, int ndim, int writable, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, view, flags) < 0) {
        return -1;
    }
    if (view->ndim != ndim || view->itemsize != 4 || view->format == NULL || strcmp(view->format, "f") != 0) {
        PyErr_Format(PyExc_ValueError, "%s: expected a C-contiguous float32 array of %d dimensions", what, ndim);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

#define BLOCK 32 /* outputs kept in registers while the inputs stream by: four 8-wide vectors */

/* y (rows, n_out) = act(x (rows, n_in; row stride `stride`) W[:n_in] + W[n_in]): for each row, BLOCK outputs at a
 * time accumulate in registers over all inputs (each weight read once per row, no store until the block is done);
 * compiled for AVX2 + FMA and for plain x86-64, the CPU picks at load time. */
__attribute__((target_clones("arch=x86-64-v3", "default")))
static void layer(const float *restrict x, Py_ssize_t stride, Py_ssize_t rows, Py_ssize_t n_in, Py_ssize_t n_out,
                  const float *restrict w, float *restrict y, int activation) {
    const float *bias = w + n_in * n_out;
    for (Py_ssize_t r = 0; r < rows; r++) {
        const float *xr = x + r * stride;
        float *yr = y + r * n_out;
        Py_ssize_t j0 = 0;
        for (; j0 + BLOCK <= n_out; j0 += BLOCK) {
            float acc[BLOCK];
            for (int j = 0; j < BLOCK; j++) {
                acc[j] = bias[j0 + j];
            }
            for (Py_ssize_t i = 0; i < n_in; i++) {
                const float xi = xr[i];
                const float *wi = w + i * n_out + j0;
                for (int j = 0; j < BLOCK; j++) {
                    acc[j] += xi * wi[j];
                }
            }
            for (int j = 0; j < BLOCK; j++) {
                yr[j0 + j] = acc[j];
            }
        }
        for (Py_ssize_t j = j0; j < n_out; j++) { /* the last outputs, fewer than a block */
            float acc = bias[j];
            for (Py_ssize_t i = 0; i < n_in; i++) {
                acc += xr[i] * w[i * n_out + j];
            }
            yr[j] = acc;
        }
    }
    Py_ssize_t total = rows * n_out;
    if (activation == 1) {
        for (Py_ssize_t k = 0; k < total; k++) {
            y[k] = y[k] > 0.0f ? y[k] : 0.0f;
        }
    } else if (activation == 2) {
        for (Py_ssize_t k = 0; k < total; k++) {
            y[k] = tanhf(y[k]);
        }
    }
}

static PyObject *forward(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *layers, *x_object, *out_object;
    int use_tanh;
    if (!PyArg_ParseTuple(args, "O!OOp", &PyTuple_Type, &layers, &x_object, &out_object, &use_tanh)) {
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(layers);
    if (count < 1 || count > MAX_LAYERS) {
        return PyErr_Format(PyExc_ValueError, "layers: expected 1 to %d, got %zd", MAX_LAYERS, count);
    }
    Py_buffer views[MAX_LAYERS], x, out;
    Py_ssize_t held = 0;
    PyObject *result = NULL;
    float *scratch = NULL;
    int have_x = 0, have_out = 0;
    for (; held < count; held++) {
        if (float_buffer(PyTuple_GET_ITEM(layers, held), &views[held], 2, 0, "layer") < 0) {
            goto done;
        }
    }
    if (float_buffer(x_object, &x, 2, 0, "x") < 0) {
        goto done;
    }
    have_x = 1;
    if (float_buffer(out_object, &out, 1, 1, "out") < 0) {
        goto done;
    }
    have_out = 1;
    Py_ssize_t rows = x.shape[0], width = views[0].shape[0] - 1;
    if (x.shape[1] < width || out.shape[0] != rows) {
        PyErr_SetString(PyExc_ValueError, "x has fewer columns than the first layer's inputs, or out is not (rows,)");
        goto done;
    }
    for (Py_ssize_t l = 0; l < count; l++) {
        Py_ssize_t n_in = views[l].shape[0] - 1, n_out = views[l].shape[1];
        int last = l == count - 1;
        if (n_in != width || n_out < 1 || n_out > MAX_WIDTH || (last && n_out != 1)) {
            PyErr_SetString(PyExc_ValueError, "layers do not chain from the input to one output");
            goto done;
        }
        width = n_out;
    }
    scratch = malloc(2 * (size_t)(rows ? rows : 1) * MAX_WIDTH * sizeof(float));
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const float *input = x.buf;
    Py_ssize_t stride = x.shape[1];
    float *buffers[2] = {scratch, scratch + (size_t)(rows ? rows : 1) * MAX_WIDTH};
    for (Py_ssize_t l = 0; l < count; l++) {
        Py_ssize_t n_in = views[l].shape[0] - 1, n_out = views[l].shape[1];
        int activation = l == count - 1 ? 0 : (use_tanh ? 2 : 1);
        float *output = buffers[l % 2];
        layer(input, stride, rows, n_in, n_out, views[l].buf, output, activation);
        input = output;
        stride = n_out;
    }
    float *risks = out.buf;
    for (Py_ssize_t r = 0; r < rows; r++) {
        risks[r] = (float)(0.5 + 0.5 * tanh(0.5 * (double)input[r]));
    }
    result = Py_None;
    Py_INCREF(result);
done:
    free(scratch);
    for (Py_ssize_t l = 0; l < held; l++) {
        PyBuffer_Release(&views[l]);
    }
    if (have_x) {
        PyBuffer_Release(&x);
    }
    if (have_out) {
        PyBuffer_Release(&out);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"forward", forward, METH_VARARGS, "forward(layers, x, out, tanh): the risk model's pass (see the file's header)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_mlp", "The fast-loop risk model's forward pass in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__mlp(void) { return PyModule_Create(&module); }
