/* The fast-loop risk model's forward pass in C: robot_rl.safety._mlp.forward.
 *
 * FastCriticModel (robot_rl/safety/fast_critic/) calls this every tick of the safety node. In numpy the pass takes
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
 *
 *     score_command(layers, motion, force, torque, gripper, context, arm_pos, arm_rot, cmd_pos, cmd_rot,
 *                   cmd_gripper, row, tanh) -> float | None
 *
 * The risk of one command, its input built here as FastCriticFilter builds it in Python (fast_state, then the task
 * context, then command_delta) and written to `row`: the safety node's tick calls this once while its filter is
 * released, in place of a dozen numpy calls. motion (12,), force (3,), torque (3,), arm_pos (3,), arm_rot (3, 3),
 * cmd_pos (3,), cmd_rot (3, 3): C-contiguous float64 or float32 buffers (m, rad, m/s, rad/s, N, N m; base frame;
 * rotations TCP -> base); context (C,): float32, C the first layer's inputs less 26; gripper, cmd_gripper: floats;
 * row (26 + C,): float32, written. Returns None, and leaves row as it was, when the command's turn from the
 * measured orientation is within 1e-4 rad of a half turn (turn_between's other branch: the caller decides in Python).
 *
 *     score_candidates(layers, row, factors, recoveries, candidates, risks, tanh) -> None
 *
 * The candidates of an engaged (or engaging) tick, scored in one pass: row (26 + C,) as score_command wrote it;
 * candidates (S + R, 7) are written as factors (S, 7) times the row's delta, then the recoveries (R, 7) as given
 * (SafetyFilter.candidates' rows); risks (S + R,) are written. All float32, C-contiguous; wrong shapes raise
 * ValueError.
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

#define BLOCK 32     /* outputs kept in registers while the inputs stream by: four 8-wide vectors */
#define ROWS 4       /* rows sharing each weight read, ... */
#define ROW_BLOCK 16 /* ... ROW_BLOCK outputs each: eight 8-wide vectors */

/* One row: BLOCK outputs at a time accumulate in registers over all inputs. */
static inline void one_row(const float *restrict xr, Py_ssize_t n_in, Py_ssize_t n_out, const float *restrict w,
                           float *restrict yr) {
    const float *bias = w + n_in * n_out;
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

/* ROWS rows at once: each block of weights is read once for all of them (the candidates of one tick). */
static inline void row_group(const float *restrict x, Py_ssize_t stride, Py_ssize_t n_in, Py_ssize_t n_out,
                             const float *restrict w, float *restrict y) {
    const float *bias = w + n_in * n_out;
    Py_ssize_t j0 = 0;
    for (; j0 + ROW_BLOCK <= n_out; j0 += ROW_BLOCK) {
        float a0[ROW_BLOCK], a1[ROW_BLOCK], a2[ROW_BLOCK], a3[ROW_BLOCK]; /* one per row of the group */
        for (int j = 0; j < ROW_BLOCK; j++) {
            a0[j] = a1[j] = a2[j] = a3[j] = bias[j0 + j];
        }
        for (Py_ssize_t i = 0; i < n_in; i++) {
            const float *wi = w + i * n_out + j0;
            const float x0 = x[i], x1 = x[stride + i], x2 = x[2 * stride + i], x3 = x[3 * stride + i];
            for (int j = 0; j < ROW_BLOCK; j++) {
                a0[j] += x0 * wi[j];
                a1[j] += x1 * wi[j];
                a2[j] += x2 * wi[j];
                a3[j] += x3 * wi[j];
            }
        }
        for (int j = 0; j < ROW_BLOCK; j++) {
            y[j0 + j] = a0[j];
            y[n_out + j0 + j] = a1[j];
            y[2 * n_out + j0 + j] = a2[j];
            y[3 * n_out + j0 + j] = a3[j];
        }
    }
    for (int r = 0; r < ROWS && j0 < n_out; r++) { /* the last outputs, fewer than a block */
        for (Py_ssize_t j = j0; j < n_out; j++) {
            float acc = bias[j];
            for (Py_ssize_t i = 0; i < n_in; i++) {
                acc += x[r * stride + i] * w[i * n_out + j];
            }
            y[r * n_out + j] = acc;
        }
    }
}

/* y (rows, n_out) = act(x (rows, n_in; row stride `stride`) W[:n_in] + W[n_in]), in groups of ROWS rows, then row by
 * row; no store until a block of outputs is done. Compiled for AVX2 + FMA and for plain x86-64, the CPU picks at
 * load time. */
__attribute__((target_clones("arch=x86-64-v3", "default")))
static void layer(const float *restrict x, Py_ssize_t stride, Py_ssize_t rows, Py_ssize_t n_in, Py_ssize_t n_out,
                  const float *restrict w, float *restrict y, int activation) {
    Py_ssize_t r = 0;
    for (; r + ROWS <= rows; r += ROWS) {
        row_group(x + r * stride, stride, n_in, n_out, w, y + r * n_out);
    }
    for (; r < rows; r++) {
        one_row(x + r * stride, n_in, n_out, w, y + r * n_out);
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

/* Check that layers[0..count) chain from `width` inputs to one output; 0, or -1 with ValueError set. */
static int check_chain(Py_buffer *views, Py_ssize_t count, Py_ssize_t width) {
    for (Py_ssize_t l = 0; l < count; l++) {
        Py_ssize_t n_in = views[l].shape[0] - 1, n_out = views[l].shape[1];
        int last = l == count - 1;
        if (n_in != width || n_out < 1 || n_out > MAX_WIDTH || (last && n_out != 1)) {
            PyErr_SetString(PyExc_ValueError, "layers do not chain from the input to one output");
            return -1;
        }
        width = n_out;
    }
    return 0;
}

/* Run the checked layers on `rows` inputs (row stride `stride`), ping-ponging between two buffers of rows x
 * MAX_WIDTH floats; returns the buffer holding the (rows,) logits. */
static const float *run_layers(Py_buffer *views, Py_ssize_t count, const float *input, Py_ssize_t stride,
                               Py_ssize_t rows, float *buffers[2], int use_tanh) {
    for (Py_ssize_t l = 0; l < count; l++) {
        Py_ssize_t n_in = views[l].shape[0] - 1, n_out = views[l].shape[1];
        int activation = l == count - 1 ? 0 : (use_tanh ? 2 : 1);
        float *output = buffers[l % 2];
        layer(input, stride, rows, n_in, n_out, views[l].buf, output, activation);
        input = output;
        stride = n_out;
    }
    return input;
}

static float risk_of(float logit) { return (float)(0.5 + 0.5 * tanh(0.5 * (double)logit)); }

/* Acquire every layer of the tuple as a float32 2-D buffer; returns how many were acquired (== count on success). */
static Py_ssize_t layer_views(PyObject *layers, Py_buffer *views) {
    Py_ssize_t count = PyTuple_GET_SIZE(layers), held = 0;
    if (count < 1 || count > MAX_LAYERS) {
        PyErr_Format(PyExc_ValueError, "layers: expected 1 to %d, got %zd", MAX_LAYERS, count);
        return 0;
    }
    for (; held < count; held++) {
        if (float_buffer(PyTuple_GET_ITEM(layers, held), &views[held], 2, 0, "layer") < 0) {
            break;
        }
    }
    return held;
}

static void release_views(Py_buffer *views, Py_ssize_t held) {
    for (Py_ssize_t l = 0; l < held; l++) {
        PyBuffer_Release(&views[l]);
    }
}

static PyObject *forward(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *layers, *x_object, *out_object;
    int use_tanh;
    if (!PyArg_ParseTuple(args, "O!OOp", &PyTuple_Type, &layers, &x_object, &out_object, &use_tanh)) {
        return NULL;
    }
    Py_buffer views[MAX_LAYERS], x, out;
    Py_ssize_t count = PyTuple_GET_SIZE(layers), held = layer_views(layers, views);
    PyObject *result = NULL;
    float *scratch = NULL;
    int have_x = 0, have_out = 0;
    if (held < count || count < 1) {
        goto done;
    }
    if (float_buffer(x_object, &x, 2, 0, "x") < 0) {
        goto done;
    }
    have_x = 1;
    if (float_buffer(out_object, &out, 1, 1, "out") < 0) {
        goto done;
    }
    have_out = 1;
    Py_ssize_t rows = x.shape[0];
    if (x.shape[1] < views[0].shape[0] - 1 || out.shape[0] != rows) {
        PyErr_SetString(PyExc_ValueError, "x has fewer columns than the first layer's inputs, or out is not (rows,)");
        goto done;
    }
    if (check_chain(views, count, views[0].shape[0] - 1) < 0) {
        goto done;
    }
    scratch = malloc(2 * (size_t)(rows ? rows : 1) * MAX_WIDTH * sizeof(float));
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    float *buffers[2] = {scratch, scratch + (size_t)(rows ? rows : 1) * MAX_WIDTH};
    const float *logits = run_layers(views, count, x.buf, x.shape[1], rows, buffers, use_tanh);
    float *risks = out.buf;
    for (Py_ssize_t r = 0; r < rows; r++) {
        risks[r] = risk_of(logits[r]);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    free(scratch);
    release_views(views, held);
    if (have_x) {
        PyBuffer_Release(&x);
    }
    if (have_out) {
        PyBuffer_Release(&out);
    }
    return result;
}

/* Copy a C-contiguous float64 or float32 buffer of exactly n values into dst as doubles; 0, or -1 with an error. */
static int read_doubles(PyObject *object, double *dst, Py_ssize_t n, const char *what) {
    Py_buffer view;
    if (PyObject_GetBuffer(object, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    int is_double = view.itemsize == 8 && view.format != NULL && strcmp(view.format, "d") == 0;
    int is_float = view.itemsize == 4 && view.format != NULL && strcmp(view.format, "f") == 0;
    if ((!is_double && !is_float) || view.len != n * view.itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd float64 or float32 values", what, n);
        PyBuffer_Release(&view);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        dst[i] = is_double ? ((const double *)view.buf)[i] : (double)((const float *)view.buf)[i];
    }
    PyBuffer_Release(&view);
    return 0;
}

/* The rotation vector of R_target R_measured^T (both row-major 3x3), as turn_between in fast_risk.py computes it;
 * 0, or -1 near a half turn (that branch stays in Python). */
#define PI 3.14159265358979323846 /* math.pi */

static int turn_between(const double *a, const double *b, double *v) {
    double trace = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5] + a[6] * b[6] +
                   a[7] * b[7] + a[8] * b[8];
    double x = 0.5 * ((a[6] * b[3] + a[7] * b[4] + a[8] * b[5]) - (a[3] * b[6] + a[4] * b[7] + a[5] * b[8]));
    double y = 0.5 * ((a[0] * b[6] + a[1] * b[7] + a[2] * b[8]) - (a[6] * b[0] + a[7] * b[1] + a[8] * b[2]));
    double z = 0.5 * ((a[3] * b[0] + a[4] * b[1] + a[5] * b[2]) - (a[0] * b[3] + a[1] * b[4] + a[2] * b[5]));
    double cosine = (trace - 1.0) / 2.0;
    double angle = acos(cosine < -1.0 ? -1.0 : (cosine > 1.0 ? 1.0 : cosine));
    if (!(angle < 1e-6)) {
        if (PI - angle < 1e-4) {
            return -1;
        }
        double scale = angle / sin(angle);
        x *= scale;
        y *= scale;
        z *= scale;
    }
    v[0] = x;
    v[1] = y;
    v[2] = z;
    return 0;
}

#define STATE_WIDTH 19
#define INPUT_WIDTH 26
#define MAX_CANDIDATES 64

static PyObject *score_command(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *layers, *motion_o, *force_o, *torque_o, *context_o, *arm_pos_o, *arm_rot_o, *cmd_pos_o, *cmd_rot_o;
    PyObject *row_o;
    double gripper, cmd_gripper;
    int use_tanh;
    if (!PyArg_ParseTuple(args, "O!OOOdOOOOOdOp", &PyTuple_Type, &layers, &motion_o, &force_o, &torque_o, &gripper,
                          &context_o, &arm_pos_o, &arm_rot_o, &cmd_pos_o, &cmd_rot_o, &cmd_gripper, &row_o,
                          &use_tanh)) {
        return NULL;
    }
    double state[STATE_WIDTH], arm_pos[3], arm_rot[9], cmd_pos[3], cmd_rot[9], turn[3];
    if (read_doubles(motion_o, state, 12, "motion") < 0 || read_doubles(force_o, state + 12, 3, "force") < 0 ||
        read_doubles(torque_o, state + 15, 3, "torque") < 0 || read_doubles(arm_pos_o, arm_pos, 3, "arm_pos") < 0 ||
        read_doubles(arm_rot_o, arm_rot, 9, "arm_rot") < 0 || read_doubles(cmd_pos_o, cmd_pos, 3, "cmd_pos") < 0 ||
        read_doubles(cmd_rot_o, cmd_rot, 9, "cmd_rot") < 0) {
        return NULL;
    }
    state[18] = gripper;
    Py_buffer views[MAX_LAYERS], context, row;
    Py_ssize_t count = PyTuple_GET_SIZE(layers), held = layer_views(layers, views);
    PyObject *result = NULL;
    int have_context = 0, have_row = 0;
    if (held < count || count < 1) {
        goto done;
    }
    if (float_buffer(context_o, &context, 1, 0, "context") < 0) {
        goto done;
    }
    have_context = 1;
    if (float_buffer(row_o, &row, 1, 1, "row") < 0) {
        goto done;
    }
    have_row = 1;
    Py_ssize_t width = views[0].shape[0] - 1, context_width = context.shape[0];
    if (width != INPUT_WIDTH + context_width || row.shape[0] != width || context_width > MAX_WIDTH) {
        PyErr_SetString(PyExc_ValueError, "the first layer does not take 26 inputs plus the context, or row has "
                                          "another width");
        goto done;
    }
    if (check_chain(views, count, width) < 0) {
        goto done;
    }
    if (turn_between(cmd_rot, arm_rot, turn) < 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    float *input = row.buf; /* the state, then the context, then the delta: the first layer's rows */
    for (int i = 0; i < STATE_WIDTH; i++) {
        input[i] = (float)state[i];
    }
    memcpy(input + STATE_WIDTH, context.buf, (size_t)context_width * sizeof(float));
    float *delta = input + STATE_WIDTH + context_width;
    for (int i = 0; i < 3; i++) {
        delta[i] = (float)(cmd_pos[i] - arm_pos[i]);
        delta[3 + i] = (float)turn[i];
    }
    delta[6] = (float)(cmd_gripper - gripper);
    float first[MAX_WIDTH], second[MAX_WIDTH];
    float *buffers[2] = {first, second};
    const float *logit = run_layers(views, count, input, width, 1, buffers, use_tanh);
    result = PyFloat_FromDouble((double)risk_of(logit[0]));
done:
    release_views(views, held);
    if (have_context) {
        PyBuffer_Release(&context);
    }
    if (have_row) {
        PyBuffer_Release(&row);
    }
    return result;
}

static PyObject *score_candidates(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *layers, *row_o, *factors_o, *recoveries_o, *candidates_o, *risks_o;
    int use_tanh;
    if (!PyArg_ParseTuple(args, "O!OOOOOp", &PyTuple_Type, &layers, &row_o, &factors_o, &recoveries_o,
                          &candidates_o, &risks_o, &use_tanh)) {
        return NULL;
    }
    Py_buffer views[MAX_LAYERS], parts[5];
    Py_ssize_t count = PyTuple_GET_SIZE(layers), held = layer_views(layers, views), have = 0;
    PyObject *objects[5] = {row_o, factors_o, recoveries_o, candidates_o, risks_o};
    static const int dims[5] = {1, 2, 2, 2, 1}, writable[5] = {0, 0, 0, 1, 1};
    static const char *names[5] = {"row", "factors", "recoveries", "candidates", "risks"};
    PyObject *result = NULL;
    float *scratch = NULL;
    if (held < count || count < 1) {
        goto done;
    }
    for (; have < 5; have++) {
        if (float_buffer(objects[have], &parts[have], dims[have], writable[have], names[have]) < 0) {
            goto done;
        }
    }
    Py_ssize_t width = views[0].shape[0] - 1, scaled = parts[1].shape[0], recovering = parts[2].shape[0];
    Py_ssize_t rows = scaled + recovering;
    if (width < INPUT_WIDTH || parts[0].shape[0] != width || parts[1].shape[1] != 7 || parts[2].shape[1] != 7 ||
        parts[3].shape[0] != rows || parts[3].shape[1] != 7 || parts[4].shape[0] != rows || rows < 1 ||
        rows > MAX_CANDIDATES) {
        PyErr_SetString(PyExc_ValueError, "row, factors (S, 7), recoveries (R, 7), candidates (S + R, 7) and risks "
                                          "(S + R,) do not fit the first layer");
        goto done;
    }
    if (check_chain(views, count, width) < 0) {
        goto done;
    }
    scratch = malloc((size_t)rows * (width + 2 * MAX_WIDTH) * sizeof(float));
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const float *row = parts[0].buf, *delta = row + width - 7, *factors = parts[1].buf, *recoveries = parts[2].buf;
    float *candidates = parts[3].buf, *inputs = scratch;
    for (Py_ssize_t k = 0; k < rows; k++) {
        float *candidate = candidates + 7 * k, *input = inputs + k * width;
        for (int i = 0; i < 7; i++) {
            candidate[i] = k < scaled ? factors[7 * k + i] * delta[i] : recoveries[7 * (k - scaled) + i];
        }
        memcpy(input, row, (size_t)(width - 7) * sizeof(float));
        memcpy(input + width - 7, candidate, 7 * sizeof(float));
    }
    float *buffers[2] = {scratch + rows * width, scratch + rows * (width + MAX_WIDTH)};
    const float *logits = run_layers(views, count, inputs, width, rows, buffers, use_tanh);
    float *risks = parts[4].buf;
    for (Py_ssize_t k = 0; k < rows; k++) {
        risks[k] = risk_of(logits[k]);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    free(scratch);
    release_views(views, held);
    for (Py_ssize_t i = 0; i < have; i++) {
        PyBuffer_Release(&parts[i]);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"forward", forward, METH_VARARGS, "forward(layers, x, out, tanh): the risk model's pass (see the file's header)"},
    {"score_command", score_command, METH_VARARGS,
     "score_command(layers, motion, force, torque, gripper, context, arm_pos, arm_rot, cmd_pos, cmd_rot, cmd_gripper, "
     "row, tanh) -> the risk of one command, or None (see the file's header)"},
    {"score_candidates", score_candidates, METH_VARARGS,
     "score_candidates(layers, row, factors, recoveries, candidates, risks, tanh): the line search's and the "
     "recoveries' risks (see the file's header)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_mlp", "The fast-loop risk model's forward pass in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__mlp(void) { return PyModule_Create(&module); }
