/*
 * fastops.c - a C extension module that instruments its own stages with
 * prof. Built against the same shared runtime as `import prof`, its zones
 * land in the same summary and trace as the Python zones around the calls,
 * nested under them.
 *
 *   fastops.dot(a, b)  -> float   sum of products of two float sequences
 *   fastops.matmul(n)  -> float   trace of A*B for two n x n matrices
 *
 * Build: meson (examples/python/extension/meson.build) or by hand, see
 * build.sh: cc -shared -fPIC -I$(python3 -c 'import prof;print(prof.get_include())')
 *           $(python3-config --includes) fastops.c ... $(prof.get_link_args())
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>

#include <prof.h>

/* Copy a sequence of numbers into a new C array; -1 with an exception on
 * failure. */
static int to_doubles(PyObject *seq, double **out, Py_ssize_t *n)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of numbers");
    Py_ssize_t i;

    if (fast == NULL)
        return -1;
    *n = PySequence_Fast_GET_SIZE(fast);
    *out = malloc((size_t)(*n > 0 ? *n : 1) * sizeof(double));
    if (*out == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (i = 0; i < *n; i++) {
        (*out)[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
        if ((*out)[i] == -1.0 && PyErr_Occurred()) {
            free(*out);
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

static PyObject *dot(PyObject *self, PyObject *args)
{
    PROF_ZONE("c.dot");                 /* until the function returns */
    PyObject *a, *b;
    double *x = NULL, *y = NULL, acc = 0.0;
    Py_ssize_t n, m, i;

    (void)self;
    if (!PyArg_ParseTuple(args, "OO:dot", &a, &b))
        return NULL;
    {
        PROF_ZONE("c.dot.convert");
        if (to_doubles(a, &x, &n) < 0)
            return NULL;
        if (to_doubles(b, &y, &m) < 0) {
            free(x);
            return NULL;
        }
    }
    if (n != m) {
        free(x);
        free(y);
        return PyErr_Format(PyExc_ValueError, "dot: lengths differ (%zd, %zd)", n, m);
    }
    /* Zones need no GIL: this one is recorded by the same thread ring. */
    Py_BEGIN_ALLOW_THREADS
    {
        PROF_ZONE("c.dot.kernel");
        for (i = 0; i < n; i++)
            acc += x[i] * y[i];
    }
    Py_END_ALLOW_THREADS
    free(x);
    free(y);
    return PyFloat_FromDouble(acc);
}

static PyObject *matmul(PyObject *self, PyObject *args)
{
    Py_ssize_t n, i, j, k;
    double *a, *b, *c, tr = 0.0;

    (void)self;
    if (!PyArg_ParseTuple(args, "n:matmul", &n))
        return NULL;
    if (n <= 0 || n > 4096)
        return PyErr_Format(PyExc_ValueError, "matmul: n must be in 1..4096, not %zd", n);
    a = malloc((size_t)(n * n) * sizeof(double));
    b = malloc((size_t)(n * n) * sizeof(double));
    c = calloc((size_t)(n * n), sizeof(double));
    if (a == NULL || b == NULL || c == NULL) {
        free(a);
        free(b);
        free(c);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    {
        /* The explicit pair, for a stage that is not a block. */
        PROF_ZONE_BEGIN(fill, "c.matmul.fill");
        for (i = 0; i < n * n; i++) {
            a[i] = (double)(i % 7) * 0.5;
            b[i] = (double)(i % 5) * 0.25;
        }
        PROF_ZONE_END(fill);

        PROF_ZONE("c.matmul.kernel");
        for (i = 0; i < n; i++)
            for (k = 0; k < n; k++)
                for (j = 0; j < n; j++)
                    c[i * n + j] += a[i * n + k] * b[k * n + j];
        for (i = 0; i < n; i++)
            tr += c[i * n + i];
    }
    Py_END_ALLOW_THREADS
    PROF_COUNTER("c.matmul.trace", tr);
    free(a);
    free(b);
    free(c);
    return PyFloat_FromDouble(tr);
}

static PyMethodDef methods[] = {
    {"dot", dot, METH_VARARGS, "dot(a, b) -> sum of a[i] * b[i]"},
    {"matmul", matmul, METH_VARARGS, "matmul(n) -> trace of the product of two n x n matrices"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "fastops", "A C extension timed with prof.", -1, methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_fastops(void);

PyMODINIT_FUNC PyInit_fastops(void)
{
    return PyModule_Create(&module);
}
