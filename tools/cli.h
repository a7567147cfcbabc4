/*
 * cli.h — shared pieces of the glim subcommands: option value parsing with
 * messages that name the flag, and the default-model lookup. Main thread.
 */
#ifndef GLIM_CLI_H
#define GLIM_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Each subcommand: returns the process exit code (0 ok, 1 failure, 2 usage). */
int cmd_run(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);

/* Parse an integer/float option value; on error print "glim CMD: FLAG: ..." and return false. */
bool cli_int(const char *cmd, const char *flag, const char *val, long long lo, long long hi,
             long long *out);
bool cli_float(const char *cmd, const char *flag, const char *val, double lo, double hi,
               double *out);
/* argv[*i] is a flag that takes a value: return it and advance, or print an error and return NULL */
const char *cli_value(const char *cmd, int argc, char **argv, int *i);
/* Comma/space separated ids ("1,2,3"); *out is malloc'ed. false + message on error. */
bool cli_parse_ids(const char *cmd, const char *text, int32_t **out, int *n);
/* Read a whole file (malloc'ed, NUL-terminated). false + message on error. */
bool cli_read_file(const char *cmd, const char *path, char **out, size_t *len);
/* The embedded default model (models/stories260K.gguf) */
const char *cli_default_model(void);

#endif
