# `cimport prof` finds this file; the declarations live in prof.pxd.
include "prof.pxd"
