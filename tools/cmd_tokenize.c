/*
 * cmd_tokenize.c — `glim tokenize`: print the token ids of a text.
 *
 * Output: the ids on one line, separated by spaces. With --pieces, one token
 * per line instead: the id, a tab, and the bytes it stands for in single
 * quotes, C-escaped (\n \t \r \\ \' and \xNN for other control or invalid
 * bytes; valid UTF-8 printed as is). Control tokens show their text.
 * Nothing is added unless --add-special (BOS/EOS as the vocabulary says);
 * control-token text is plain text unless --special.
 */
#include "cli.h"

#ifdef GLIM_HAVE_TEXT

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "text/tok.h"
#include "text/utf8.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: glim tokenize [-m MODEL] (-p TEXT | -f FILE) [options]\n\n"
            "Print the token ids of a text, space-separated on one line.\n\n"
            "  -m, --model FILE      GGUF whose tokenizer.ggml.* vocabulary to use\n"
            "                        (default: the embedded model)\n"
            "  -p, --prompt TEXT     text to tokenize\n"
            "  -f, --file FILE       read the text from FILE (bytes as they are)\n"
            "  --tokenizer FILE      use a Hugging Face tokenizer.json instead of the GGUF's vocabulary\n"
            "  --muse-glimmer-vocab  rename the Muse Glimmer control slots of a Llama 4 vocabulary\n"
            "  --add-special         add BOS/EOS as the vocabulary's add_bos/add_eos say\n"
            "  --special             parse control-token text (<|eot|> ...) into its id\n"
            "  --pieces              one token per line: ID<TAB>'bytes' (C-escaped)\n"
            "  -h, --help            this text\n");
}

struct opts {
    const char *model, *prompt, *file, *tokenizer;
    bool muse, add_special, special, pieces;
};

/* 0 ok, 1 help shown, 2 usage error */
static int parse(int argc, char **argv, struct opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            slot = &o->model;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            slot = &o->prompt;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            slot = &o->file;
        } else if (!strcmp(a, "--tokenizer")) {
            slot = &o->tokenizer;
        } else if (!strcmp(a, "--muse-glimmer-vocab")) {
            o->muse = true;
        } else if (!strcmp(a, "--add-special")) {
            o->add_special = true;
        } else if (!strcmp(a, "--special")) {
            o->special = true;
        } else if (!strcmp(a, "--pieces")) {
            o->pieces = true;
        } else {
            fprintf(stderr, "glim tokenize: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (slot && !(*slot = cli_value("tokenize", argc, argv, &i)))
            return 2;
    }
    if (!o->prompt == !o->file) {
        fprintf(stderr, "glim tokenize: give exactly one of -p TEXT or -f FILE (see --help)\n");
        return 2;
    }
    return 0;
}

static int load_vocab(const struct opts *o, struct tok_vocab **v, struct glim_err *err)
{
    int rc;
    if (o->tokenizer) {
        rc = tok_vocab_from_json(o->tokenizer, v, err);
    } else {
        struct gguf_file *f = NULL;
        rc = gguf_open(o->model, &f, err);
        if (rc == GLIM_OK)
            rc = tok_vocab_from_gguf(f, v, err);
        gguf_close(f);
    }
    if (rc == GLIM_OK && o->muse && (rc = tok_vocab_apply_muse_glimmer(*v, err)) != GLIM_OK) {
        tok_vocab_free(*v);
        *v = NULL;
    }
    return rc;
}

static void print_piece(const struct tok_vocab *v, int32_t id, struct strbuf *sb)
{
    strbuf_reset(sb);
    tok_piece_bytes(v, id, TOK_DECODE_SPECIAL, sb);
    printf("%d\t'", id);
    for (size_t i = 0; i < sb->len;) {
        unsigned char c = (unsigned char)sb->data[i];
        uint32_t cp;
        int n = utf8_decode(sb->data + i, sb->len - i, &cp);
        if (c == '\n' || c == '\t' || c == '\r' || c == '\\' || c == '\'')
            printf("\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' : (char)c);
        else if (n == 0 || c < 0x20 || c == 0x7F)
            printf("\\x%02x", c);
        else
            fwrite(sb->data + i, 1, (size_t)n, stdout);
        i += n > 0 ? (size_t)n : 1;
    }
    printf("'\n");
}

int cmd_tokenize(int argc, char **argv)
{
    struct opts o = {.model = cli_default_model()};
    int u = parse(argc, argv, &o);
    if (u)
        return u == 1 ? 0 : 2;
    char *text = NULL;
    size_t len = 0;
    if (o.file && !cli_read_file("tokenize", o.file, &text, &len))
        return 1;
    if (o.prompt)
        len = strlen(o.prompt);

    struct glim_err err = {0};
    struct tok_vocab *v = NULL;
    struct tok_ids ids;
    tok_ids_init(&ids);
    unsigned flags = (o.add_special ? TOK_ADD_SPECIAL : 0) | (o.special ? TOK_PARSE_SPECIAL : 0);
    int rc = load_vocab(&o, &v, &err);
    if (rc == GLIM_OK)
        rc = tok_encode(v, o.prompt ? o.prompt : text, len, flags, &ids, &err);
    if (rc != GLIM_OK) {
        fprintf(stderr, "glim tokenize: %s\n", err.msg);
    } else if (o.pieces) {
        struct strbuf sb;
        strbuf_init(&sb);
        for (size_t i = 0; i < ids.n; i++)
            print_piece(v, ids.data[i], &sb);
        strbuf_clear(&sb);
    } else {
        for (size_t i = 0; i < ids.n; i++)
            printf(i ? " %d" : "%d", ids.data[i]);
        printf("\n");
    }
    tok_ids_clear(&ids);
    tok_vocab_free(v);
    free(text);
    return rc == GLIM_OK ? 0 : 1;
}

#else
typedef int cmd_tokenize_needs_the_text_room;   /* built without PCRE2/jansson: glim.c reports it */
#endif
