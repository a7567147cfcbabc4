/*
 * backend_cpu.h — extra constructor of the fast CPU backend for tests and
 * benchmarks: pick the kernel level explicitly (enum cpu_level; -1 = the
 * level cpu_features_get() chose, which honours GLIM_CPU_LEVEL).
 * backend_cpu_new (backend.h) is backend_cpu_new_level(n, -1, ...).
 */
#ifndef GLIM_BACKEND_CPU_H
#define GLIM_BACKEND_CPU_H

#include "../backend/backend.h"

int backend_cpu_new_level(int n_threads,        /* 0 = physical cores */
                          int level,            /* enum cpu_level or -1 */
                          struct backend **out, /* OUT: untouched on failure */
                          struct glim_err *err);/* GLIM_EUNSUPPORTED if the CPU lacks that ISA */

#endif
