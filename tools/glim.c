/*
 * glim.c — main(): the subcommand table. Each subcommand lives in its own
 * cmd_<name>.c; one that is not part of this build (its room's library was
 * missing at configure time) is a weak NULL symbol and says so.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "glim.h"

#pragma weak cmd_run
#pragma weak cmd_serve
#pragma weak cmd_bench
#pragma weak cmd_eval
#pragma weak cmd_tokenize
#pragma weak cmd_info
#pragma weak cmd_quantize
#pragma weak cmd_mkmodel

struct subcmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

static void usage(FILE *out, const struct subcmd *cmds, size_t n)
{
    fprintf(out, "glim %s — run GGUF language models (Muse Glimmer, llama) on CPU and GPU\n\n"
                 "usage: glim <command> [options]   (glim <command> --help for its options)\n\n"
                 "commands:\n", GLIM_VERSION);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "  %-10s %s%s\n", cmds[i].name, cmds[i].help,
                cmds[i].fn ? "" : " (not in this build)");
    fprintf(out, "\nWith no command, glim runs the embedded default model (models/stories260K.gguf).\n");
}

int main(int argc, char **argv)
{
    const struct subcmd cmds[] = {
        {"run", cmd_run, "generate text from a prompt (streams to stdout)"},
        {"serve", cmd_serve, "OpenAI-compatible HTTP server"},
        {"bench", cmd_bench, "prompt/decode throughput (llama-bench shapes)"},
        {"eval", cmd_eval, "run token ids, write logits, greedy continuation"},
        {"tokenize", cmd_tokenize, "print token ids of a text"},
        {"info", cmd_info, "print GGUF metadata and tensor table"},
        {"quantize", cmd_quantize, "convert F32/F16/BF16 GGUF to Q8_0/Q4_K/..."},
        {"mkmodel", cmd_mkmodel, "write a synthetic GGUF with random weights"},
    };
    size_t n = sizeof cmds / sizeof cmds[0];
    if (argc < 2) {
        /* the README's first command: something real happens out of the box */
        if (cmd_run) {
            char *args[] = {"run", NULL};
            return cmd_run(1, args);
        }
        if (cmd_eval) {
            char *args[] = {"eval", "--tokens", "1,403,407,261,378", "--generate", "32", NULL};
            return cmd_eval(5, args);
        }
        usage(stdout, cmds, n);
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout, cmds, n);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("glim %s\n", GLIM_VERSION);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[1], cmds[i].name))
            continue;
        if (!cmds[i].fn) {
            fprintf(stderr, "glim %s: not part of this build (its libraries were missing at configure time)\n",
                    cmds[i].name);
            return 1;
        }
        return cmds[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "glim: unknown command '%s'\n\n", argv[1]);
    usage(stderr, cmds, n);
    return 2;
}
