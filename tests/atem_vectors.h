/*
 * atem_vectors.h — the ATEM and routing test vectors as data, shared by
 * test_toolcall.c (parser and pipeline level) and test_server_http.c (the
 * same texts as model output through the whole HTTP path).
 *
 *   VECS   runtime.md §5.5 rows U1–U29, X1–X14 (+ glim extras G*): parser
 *          level, `normal` text and argument JSON per call
 *   PVECS  runtime.md §4.6 routing vectors, R1, gguf-contract §5.3 cases:
 *          pipeline level (reasoning / content / calls)
 *
 * Spelling: M S EOM EOT = <|message|> <|start|> <|eom|> <|eot|>; B(name, P(k, v)...)
 * is the canonical BLOCK of one INVOKE (§5.1).
 */
#ifndef GLIM_TEST_ATEM_VECTORS_H
#define GLIM_TEST_ATEM_VECTORS_H

#include <stddef.h>

#include "chat/toolcall.h"

#define M   "<|message|>"
#define S   "<|start|>"
#define EOM "<|eom|>"
#define EOT "<|eot|>"
#define P(k, v) "<atem:parameter name=\"" k "\">" v "</atem:parameter>\n"
#define INV(name, params) "<atem:invoke name=\"" name "\">\n" params "</atem:invoke>\n"
#define BLK(invokes) "<atem:function_calls>\n" invokes "</atem:function_calls>"
#define B(name, params) BLK(INV(name, params))

#define TOOLS(arr) arr, (int)(sizeof arr / sizeof arr[0])

static const struct toolcall_param WEATHER_P[] = { { "city", "string" }, { "units", "string" } };
static const struct toolcall_param ADD_P[] = { { "a", "integer" }, { "b", "integer" } };
static const struct toolcall_tool T1[] = { { "get_weather", WEATHER_P, 2 }, { "add", ADD_P, 2 } };
static const struct toolcall_param CALC_X[] = { { "x", "number" } };
static const struct toolcall_tool T_CALC[] = { { "calc", CALC_X, 1 } };
static const struct toolcall_param T2_P[] = { { "n", "integer" }, { "x", "number" }, { "flag", "boolean" } };
static const struct toolcall_tool T2[] = { { "calc", T2_P, 3 } };
static const struct toolcall_param FLAG_P[] = { { "flag", "boolean" } };
static const struct toolcall_tool T_FLAG[] = { { "f", FLAG_P, 1 } };
static const struct toolcall_param ID_P[] = { { "id", "string" } };
static const struct toolcall_tool T_ID[] = { { "f", ID_P, 1 } };
static const struct toolcall_param S_P[] = { { "s", "string" } };
static const struct toolcall_tool T_S[] = { { "f", S_P, 1 } };
static const struct toolcall_tool T_NONE[] = { { "f", NULL, 0 } };
static const struct toolcall_param LD_P[] = { { "lst", "array" }, { "d", "object" } };
static const struct toolcall_tool T_LD[] = { { "f", LD_P, 2 } };
static const struct toolcall_param CODE_P[] = { { "code", "string" } };
static const struct toolcall_tool T_CODE[] = { { "code_tool", CODE_P, 1 } };
static const struct toolcall_param EXPR_P[] = { { "expr", "string" } };
static const struct toolcall_tool T_EXPR[] = { { "f", EXPR_P, 1 } };
static const struct toolcall_param NUM_P[] = { { "x", "number" }, { "y", "number" }, { "z", "number" },
                                               { "w", "number" }, { "v", "number" }, { "u", "number" } };
static const struct toolcall_tool T_NUM[] = { { "f", NUM_P, 6 } };
static const struct toolcall_param BOOL_P[] = { { "a", "boolean" }, { "b", "boolean" }, { "c", "boolean" } };
static const struct toolcall_tool T_BOOL[] = { { "f", BOOL_P, 3 } };
static const struct toolcall_param GW_P[] = { { "city", "string" }, { "days", "integer" } };
static const struct toolcall_tool T_GW[] = { { "get_weather", GW_P, 2 } };
static const struct toolcall_param SF_P[] = { { "arg1", "integer" } };
static const struct toolcall_tool T_SF[] = { { "special_function", SF_P, 1 } };

struct vec {
    const char                 *id, *input;
    const struct toolcall_tool *tools;
    int                         n_tools;
    const char                 *normal;    /* NULL: not stated by the spec */
    const char                 *args[3];   /* expected calls, NULL-terminated */
};

#define UNCHANGED "\x01"   /* normal must equal the input */

static const struct vec VECS[] = {
    { "U1", " to=get_weather" M B("get_weather", P("city", "Paris")) EOM, TOOLS(T1), "", { "{\"city\": \"Paris\"}" } },
    { "U2", " to=get_weather" M B("get_weather", P("city", "Paris")), TOOLS(T1), NULL, { "{\"city\": \"Paris\"}" } },
    { "U3", S "assistant to=add" M B("add", P("a", "1") P("b", "2")) EOT, TOOLS(T1), NULL, { "{\"a\": 1, \"b\": 2}" } },
    { "U4", " to=get_weather constrain=json" M B("get_weather", P("city", "SF")) EOM, TOOLS(T1), "", { "{\"city\": \"SF\"}" } },
    { "U5", B("get_weather", P("city", "Paris")), TOOLS(T1), NULL, { "{\"city\": \"Paris\"}" } },
    { "U6", " to=add" M BLK(INV("add", P("a", "1") P("b", "2")) INV("add", P("a", "3") P("b", "4"))) EOT, TOOLS(T1),
      NULL, { "{\"a\": 1, \"b\": 2}", "{\"a\": 3, \"b\": 4}" } },
    { "U7", " to=add" M B("add", P("a", "1") P("b", "2")) EOM S "assistant to=add" M B("add", P("a", "3") P("b", "4")) EOT,
      TOOLS(T1), "", { "{\"a\": 1, \"b\": 2}", "{\"a\": 3, \"b\": 4}" } },
    { "U8", " to=get_weather" M B("get_weather", P("city", "Paris") P("units", "celsius")), TOOLS(T1), NULL,
      { "{\"city\": \"Paris\", \"units\": \"celsius\"}" } },
    { "U9", "Checking now. to=add" M B("add", P("a", "5") P("b", "6")) EOM, TOOLS(T1), "Checking now.", { "{\"a\": 5, \"b\": 6}" } },
    { "U10", " to=self" M "Let me check the weather." EOM S "assistant to=get_weather" M B("get_weather", P("city", "Paris")) EOM,
      TOOLS(T1), "to=self" M "Let me check the weather." EOM, { "{\"city\": \"Paris\"}" } },
    { "U11", "The weather is nice today.", TOOLS(T1), UNCHANGED, { NULL } },
    { "U12", " to=delete_everything" M B("delete_everything", P("target", "all")) EOM, TOOLS(T1), UNCHANGED, { NULL } },
    { "U13", "Sure! <atem:function_calls>\n<atem:invoke name=\"get_weather\">\n<atem:parameter name=\"city\">Paris",
      TOOLS(T1), "Sure!", { NULL } },
    { "U14", "The capital of France is Paris.", TOOLS(T1), UNCHANGED, { NULL } },
    { "U15", " to=add" M B("add", P("a", "2") P("b", "3")), TOOLS(T1), NULL, { "{\"a\": 2, \"b\": 3}" } },
    { "U16", B("calc", P("x", "3.14")), TOOLS(T_CALC), NULL, { "{\"x\": 3.14}" } },
    { "U17", B("f", P("flag", "true")), TOOLS(T_FLAG), NULL, { "{\"flag\": true}" } },
    { "U18", B("f", P("flag", "False")), TOOLS(T_FLAG), NULL, { "{\"flag\": false}" } },
    { "U19", B("f", P("id", "1234")), TOOLS(T_ID), NULL, { "{\"id\": \"1234\"}" } },
    { "U20", B("f", P("s", "  hi  ")), TOOLS(T_S), NULL, { "{\"s\": \"  hi  \"}" } },
    { "U21", B("f", P("n", "42") P("items", "[1, 2]")), TOOLS(T_NONE), NULL, { "{\"n\": 42, \"items\": [1, 2]}" } },
    { "U22", B("f", P("lst", "[1, 2]") P("d", "{\"k\": \"v\"}")), TOOLS(T_LD), NULL, { "{\"lst\": [1, 2], \"d\": {\"k\": \"v\"}}" } },
    { "U23", B("calc", P("n", "10.0")), TOOLS(T2), NULL, { "{\"n\": \"10.0\"}" } },
    { "U24", B("calc", P("flag", "1")), TOOLS(T2), NULL, { "{\"flag\": \"1\"}" } },
    { "U25", B("calc", P("n", "1_000")), TOOLS(T2), NULL, { "{\"n\": \"1_000\"}" } },
    { "U26a", B("calc", P("x", "NaN")), TOOLS(T2), NULL, { "{\"x\": \"NaN\"}" } },
    { "U26b", B("calc", P("x", "Infinity")), TOOLS(T2), NULL, { "{\"x\": \"Infinity\"}" } },
    { "U26c", B("calc", P("x", "-Infinity")), TOOLS(T2), NULL, { "{\"x\": \"-Infinity\"}" } },
    { "U26d", B("calc", P("x", "1e999")), TOOLS(T2), NULL, { "{\"x\": \"1e999\"}" } },
    { "U27", B("code_tool", P("code", "a </atem:parameter> b")), TOOLS(T_CODE), NULL, { "{\"code\": \"a </atem:parameter> b\"}" } },
    { "U28", B("code_tool", P("code", "x = <atem:invoke name=\"foo\">")), TOOLS(T_CODE), NULL,
      { "{\"code\": \"x = <atem:invoke name=\\\"foo\\\">\"}" } },
    { "U29", B("f", P("expr", "a < b && c > d")), TOOLS(T_EXPR), NULL, { "{\"expr\": \"a < b && c > d\"}" } },
    { "X1", B("add", P("a", "1")) B("nope", P("x", "1")), TOOLS(T1), UNCHANGED, { NULL } },
    { "X2", B("add", P("c", "7")), TOOLS(T1), "", { "{\"c\": 7}" } },
    { "X3", B("add", P("a", "1") P("a", "2")), TOOLS(T1), "", { "{\"a\": 2}" } },
    { "X4", B("add", ""), TOOLS(T1), "", { "{}" } },
    { "X5a", B("add", P("a", " 5 ")), TOOLS(T1), "", { "{\"a\": 5}" } },
    { "X5b", B("add", P("a", "+5")), TOOLS(T1), "", { "{\"a\": 5}" } },
    { "X6", "<atem:invoke name=\"add\">\n<atem:parameter name=\"a\">1</atem:parameter>\n</atem:invoke>", TOOLS(T1), "",
      { "{\"a\": 1}" } },
    { "X7", B("add", P("a", "1")) "\nDone.", TOOLS(T1), "", { "{\"a\": 1}" } },
    { "X8", "<atem:function_calls>\n" INV("add", P("a", "1")) "junk\n</atem:function_calls>", TOOLS(T1), "", { NULL } },
    { "X9", B("", P("a", "1")), TOOLS(T1), UNCHANGED, { NULL } },
    { "X10", "hello <atem:invoke", TOOLS(T1), "hello", { NULL } },
    { "X11", B("f", P("n", "42") P("items", "[1, 2]") P("s", "hello") P("t", "true") P("nul", "null") P("nan", "NaN") P("f", "1.5")),
      TOOLS(T_NONE), NULL,
      { "{\"n\": 42, \"items\": [1, 2], \"s\": \"hello\", \"t\": true, \"nul\": null, \"nan\": \"NaN\", \"f\": 1.5}" } },
    { "X12", B("f", P("x", "3.14") P("y", "1e3") P("z", ".5") P("w", "1.") P("v", "0x10") P("u", " 2 ")), TOOLS(T_NUM), NULL,
      { "{\"x\": 3.14, \"y\": 1000.0, \"z\": 0.5, \"w\": 1.0, \"v\": \"0x10\", \"u\": 2.0}" } },
    { "X13", B("f", P("a", "TRUE") P("b", " false ") P("c", "yes")), TOOLS(T_BOOL), NULL,
      { "{\"a\": true, \"b\": false, \"c\": \"yes\"}" } },
    { "X14", B("f", P("s", "h\xc3\xa9llo \xe2\x9c\x93")), TOOLS(T_S), NULL, { "{\"s\": \"h\xc3\xa9llo \xe2\x9c\x93\"}" } },
    /* glim extras: nested non-finite values void the calls (json.dumps raises) */
    { "G1", "pre " B("f", P("items", "[1, NaN]")), TOOLS(T_NONE), "pre", { NULL } },
    { "G2", B("f", P("o", "{\"a\":[1,{\"b\":\"\\u00e9\\n\"}],\"c\":-0,\"d\":1E2}")), TOOLS(T_NONE), NULL,
      { "{\"o\": {\"a\": [1, {\"b\": \"\xc3\xa9\\n\"}], \"c\": 0, \"d\": 100.0}}" } },
};

struct pvec {
    const char                 *input;
    const struct toolcall_tool *tools;
    int                         n_tools;
    const char                 *reasoning, *content;   /* NULL = none */
    const char                 *args[3];
};

static const struct pvec PVECS[] = {
    /* §4.6 (no tools) */
    { " to=user" M "Paris.", NULL, 0, NULL, "Paris.", { NULL } },
    { " to=self" M "We should calculate first." EOM S "assistant to=user" M "The answer is 42." EOT, NULL, 0,
      "We should calculate first.", "The answer is 42.", { NULL } },
    { "to=self" M "First step." EOM S "assistant to=self" M "Second step." EOM S "assistant to=user" M "Done." EOT, NULL, 0,
      "First step.\n\nSecond step.", "Done.", { NULL } },
    { "Visible prefix.\nto=self" M "Private step." EOM S "assistant to=user" M "Visible final." EOT, NULL, 0,
      "Private step.", "Visible prefix.\n\nVisible final.", { NULL } },
    { "The capital of France is Paris.", NULL, 0, NULL, "The capital of France is Paris.", { NULL } },
    { " to=self" M "Only thinking, truncated", NULL, 0, "Only thinking, truncated", NULL, { NULL } },
    { " to=functions.get_weather" M "{\"city\": \"Paris\"}", NULL, 0, NULL, "{\"city\": \"Paris\"}", { NULL } },
    { " to=functions.get_weather constrain=json" M "{\"city\": \"Paris\"}", NULL, 0, NULL, "{\"city\": \"Paris\"}", { NULL } },
    { "Test complete." EOM, NULL, 0, NULL, "Test complete.", { NULL } },
    { "Final answer." EOT, NULL, 0, NULL, "Final answer.", { NULL } },
    { "Use goto=label; set auto=true; field photo=front.", NULL, 0, NULL, "Use goto=label; set auto=true; field photo=front.", { NULL } },
    { S "assistant to=user" M "x<|channel|>y", NULL, 0, NULL, "xy", { NULL } },
    { "a to=user" M "b", NULL, 0, NULL, "a\n\nb", { NULL } },
    /* R1 */
    { " to=self" M "We should check the weather." EOM S "assistant to=get_weather" M B("get_weather", P("city", "Paris")) EOM,
      TOOLS(T_GW), "We should check the weather.", NULL, { "{\"city\": \"Paris\"}" } },
    /* gguf-contract §5.3 (llama.cpp cases), judged by runtime.md where they differ */
    { " to=user" M "Hello, world!\nWhat's up?" EOT, TOOLS(T_SF), NULL, "Hello, world!\nWhat's up?", { NULL } },   /* T1 */
    { " to=user" M "Hello, world!\nWhat's up?" EOM S "assistant to=special_function" M B("special_function", P("arg1", "1")),
      TOOLS(T_SF), NULL, "Hello, world!\nWhat's up?", { "{\"arg1\": 1}" } },                                  /* T2 */
    /* T3: llama.cpp keeps a block inside the user answer as content; runtime.md §5.4 parses it */
    { " to=user" M "You invoke it like this:\n" B("special_function", P("arg1", "1")) EOT, TOOLS(T_SF), NULL,
      "You invoke it like this:", { "{\"arg1\": 1}" } },
    { " to=self" M "I could use " B("special_function", P("arg1", "1")) " here" EOM S "assistant to=user" M "Hello!" EOT,
      TOOLS(T_SF), "I could use " B("special_function", P("arg1", "1")) " here", "Hello!", { NULL } },       /* T4 */
    { " to=self" M "I'm\nthinking" EOM S "assistant to=user" M "Hello!" EOT, TOOLS(T_GW), "I'm\nthinking", "Hello!", { NULL } },
    { M "No recipient given" EOT, TOOLS(T_GW), NULL, "No recipient given", { NULL } },                      /* P3 */
    { " to=self" M "Need weather." EOM S "assistant to=get_weather" M B("get_weather", P("city", "Paris") P("days", "2")) EOT,
      TOOLS(T_GW), "Need weather.", NULL, { "{\"city\": \"Paris\", \"days\": 2}" } },                         /* P4 */
    { " to=get_weather" M B("get_weather", P("city", "Paris")) EOM S "assistant to=get_weather" M B("get_weather", P("city", "Rome")),
      TOOLS(T_GW), NULL, NULL, { "{\"city\": \"Paris\"}", "{\"city\": \"Rome\"}" } },                      /* P5 */
    { " to=user" M "Let me check." EOM S "assistant to=get_weather" M B("get_weather", P("city", " New York ") P("days", "3")),
      TOOLS(T_GW), NULL, "Let me check.", { "{\"city\": \" New York \", \"days\": 3}" } },                    /* P7 */
    { " to=functions.get_weather" M B("get_weather", P("city", "Oslo")), TOOLS(T_GW), NULL, NULL, { "{\"city\": \"Oslo\"}" } },
    /* P9: llama.cpp joins reasoning with no separator; runtime.md §4.6 uses a blank line */
    { " to=self" M "hmm" EOM S "assistant to=self" M "more" EOM S "assistant to=user" M "ok" EOT, TOOLS(T_GW),
      "hmm\n\nmore", "ok", { NULL } },
    /* undefined tool: the raw text comes back as content after the filter */
    { " to=nope" M B("nope", P("x", "1")), TOOLS(T_GW), NULL, B("nope", P("x", "1")), { NULL } },
};

#endif
