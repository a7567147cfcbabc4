/*
 * test_jinja.c — the template engine on its own: expressions, statements, filters,
 * tests, whitespace control, Python value printing, errors and limits.
 *
 * The CASES table was produced by rendering each template with Python jinja2 3.1.6 in
 * the environment of tests/fixtures/chat/gen.py (HF's conventions; strftime_now pinned to
 * 2026-08-23) and pasting the results; the C side must match byte for byte.
 */
#include <string.h>
#include <time.h>

#include "chat/jinja.h"
#include "chat/jinja_int.h"   /* jinja_fmt_float */
#include "harness.h"

static time_t pinned_clock(void *ud)
{
    (void)ud;
    return (time_t)1787486400;   /* 2026-08-23 12:00:00 UTC */
}

struct render_case { const char *tmpl, *ctx_json, *want; };

static const struct render_case CASES[] = {
    {"{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 2 ** 10 }}|{{ 1.5 + 1 }}",
     "{}",
     "7|3|-4|2|3.5|1024|2.5"},
    {"{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1e-5 }}|{{ 100.0 }}|{{ 1/3 }}|{{ 123456789012345678.0 }}|{{ 0.0001 }}",
     "{}",
     "0.30000000000000004|1e+20|1e-05|100.0|0.3333333333333333|1.2345678901234568e+17|0.0001"},
    {"{{ 'a' ~ 1 ~ none ~ true }}|{{ 'ab' * 3 }}|{{ [1, 'x', none, true, 1.0] }}|{{ {'a': [1, {'b': 'it\\'s'}]} }}",
     "{}",
     "a1NoneTrue|ababab|[1, 'x', None, True, 1.0]|{'a': [1, {'b': \"it's\"}]}"},
    {"{{ x }}|{{ x is defined }}|{{ y is defined }}|{{ x | default('d') }}|{{ undefined_thing | length }}",
     "{\"y\": null}",
     "|False|True|d|0"},
    {"{% for i in items %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.length }}/{{ loop.first }}/{{ loop.last }}/{{ loop.revindex }} {% else %}empty{% endfor %}",
     "{\"items\": [\"a\", \"b\", \"c\"]}",
     "1/0/3/True/False/3 2/1/3/False/False/2 3/2/3/False/True/1 "},
    {"{% for i in items %}x{% else %}empty{% endfor %}",
     "{\"items\": []}",
     "empty"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
     "{\"d\": {\"z\": 1, \"a\": 2}}",
     "z=1;a=2;za"},
    {"{% for i in range(10) if i is odd %}{{ i }}{% if loop.last %}!{% endif %}{% endfor %}",
     "{}",
     "13579!"},
    {"{% for i in range(10) %}{% if i == 5 %}{% break %}{% endif %}{% if i is even %}{% continue %}{% endif %}{{ i }}{% endfor %}",
     "{}",
     "13"},
    {"{% set x = 1 %}{% for i in [1,2] %}{% set x = x + i %}{% endfor %}{{ x }}{% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}",
     "{}",
     "14"},
    {"{% set s %}Hello {{ name }}{% endset %}[{{ s }}]{% set t | upper %}abc{% endset %}{{ t }}",
     "{\"name\": \"Bob\"}",
     "[Hello Bob]ABC"},
    {"{% macro greet(name, greeting='Hi') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('A') }} {{ greet('B', greeting='Yo') }} {{ greet(name='C') }}",
     "{}",
     "Hi, A! Yo, B! Hi, C!"},
    {"{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inner{% endcall %}",
     "{}",
     "<inner>"},
    {"{{ s[::-1] }}|{{ s[1:3] }}|{{ s[-2:] }}|{{ l[::2] }}|{{ l[-1] }}|{{ l[1:] }}|{{ s[0] }}|{{ s[-1] }}",
     "{\"s\": \"h\\u00e9llo\", \"l\": [1, 2, 3, 4, 5]}",
     "olléh|él|lo|[1, 3, 5]|5|[2, 3, 4, 5]|h|o"},
    {"{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}",
     "{}",
     "a b|a|a|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']"},
    {"{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'Hi'.upper() }}{{ 'Hi'.lower() }}",
     "{}",
     "True|True|Hello World|Hello|bba|HIhi"},
    {"{{ d.get('a') }}|{{ d.get('zz') }}|{{ d.get('zz', 5) }}|{{ d.keys() | list }}|{{ d.values() | list }}|{{ d.items() | list }}",
     "{\"d\": {\"a\": 1, \"b\": [2]}}",
     "1|None|5|['a', 'b']|[1, [2]]|[('a', 1), ('b', [2])]"},
    {"{{ [3, 1, 2] | sort }}|{{ ['b', 'A', 'c'] | sort }}|{{ [1, 2, 2, 1] | unique | list }}|{{ d | dictsort }}|{{ [1, 2, 3] | sum }}|{{ [1, 5, 3] | max }}{{ [1, 5, 3] | min }}",
     "{\"d\": {\"b\": 1, \"A\": 2, \"c\": 0}}",
     "[1, 2, 3]|['A', 'b', 'c']|[1, 2]|[('A', 2), ('b', 1), ('c', 0)]|6|51"},
    {"{{ users | map(attribute='name') | join(', ') }}|{{ users | selectattr('admin') | map(attribute='name') | list }}|{{ users | rejectattr('admin') | list | length }}|{{ [1, 2, 3, 4] | select('odd') | list }}|{{ [1, 2, 3, 4] | reject('divisibleby', 2) | list }}|{{ ['a', 'b'] | map('upper') | list }}",
     "{\"users\": [{\"name\": \"ann\", \"admin\": true}, {\"name\": \"bob\", \"admin\": false}]}",
     "ann, bob|['ann']|1|[1, 3]|[1, 3]|['A', 'B']"},
    {"{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ 'é\"\\n' | tojson }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}",
     "{\"x\": {\"a\": [1, 2.5, null, true], \"b\": {}, \"c\": []}}",
     "{\"a\": [1, 2.5, null, true], \"b\": {}, \"c\": []}|{\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"b\": {},\n  \"c\": []\n}|\"é\\\"\\n\"|{\"a\": 2, \"b\": 1}"},
    {"{{ '  x ' | trim }}|{{ 3.7 | int }}|{{ '42' | int }}|{{ 'x' | int }}|{{ '2.5' | float }}|{{ -3 | abs }}|{{ 2.567 | round(2) }}|{{ 2.5 | round }}|{{ 'abc' | capitalize }}|{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}",
     "{}",
     "x|3|42|0|2.5|3|2.57|2.0|Abc|a\n  b\n\n  c|  a\n  b"},
    {"{{ [1, 2] | first }}{{ [1, 2] | last }}{{ 'abc' | first }}|{{ 'abc' | length }}{{ [] | length }}|{{ 'abcabc' | count }}|{{ 'a-b' | replace('-', '+') }}|{{ 1 | string ~ 'x' }}|{{ 'abc' | list }}|{{ none | default('n', true) }}",
     "{}",
     "12a|30|6|a+b|1x|['a', 'b', 'c']|n"},
    {"{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1.0 is float }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ none is none }}{{ true is boolean }}{{ true is true }}{{ false is false }}",
     "{}",
     "TrueTrueFalseTrueTrueTrueTrueTrueFalseTrueTrueTrueTrue"},
    {"{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 2 is in [1, 2] }}{{ 'a' is eq 'a' }}{{ 1 is equalto 2 }}{{ x is undefined }}{{ [] is sequence }}{{ 'ab' is lower }}{{ 1 is ne 2 }}",
     "{}",
     "TrueTrueTrueTrueTrueFalseTrueTrueTrueTrue"},
    {"{{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}{{ 'a' in 'abc' }}{{ 'z' not in ['a'] }}{{ 1 == 1.0 }}{{ 'a' if false }}{{ 'y' if true else 'n' }}{{ 0 or 'x' }}{{ 1 and 2 }}{{ not [] }}",
     "{}",
     "TrueFalseTrueTrueTrueyx2True"},
    {"  {% if true %}\n    yes\n  {% endif %}\nafter {# comment #}\n{%- if true -%}  stripped  {%- endif %}\n{{- '  v  ' -}}\n  end\n",
     "{}",
     "    yes\nafter stripped  v  end"},
    {"a\n  {%+ if true %}kept{% endif +%}\nb {%- raw %} {{ not parsed }} {% endraw -%} c\n{# c #}\nd",
     "{}",
     "a\n  kept\nb {{ not parsed }} c\nd"},
    {"{{ {'a': {'b': 1}} }}|{{ (1, 2) }}|{{ [1, 2] + [3] }}|{{ 'a' 'b' }}|{{ x.a.b }}|{{ x['a']['b'] }}|{{ x.a.get('b') }}",
     "{\"x\": {\"a\": {\"b\": 7}}}",
     "{'a': {'b': 1}}|(1, 2)|[1, 2, 3]|ab|7|7|7"},
    {"{{ strftime_now('%Y-%m-%d %a') }}|{{ 10 | string | length }}|{{ messages[0]['content'] }}",
     "{\"messages\": [{\"content\": \"c\"}]}",
     "2026-08-23 Sun|2|c"},
    {"{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set x = 1, 2 %}{{ x | length }}|{% filter upper %}shout{% endfilter %}|{{ range(3) | list }}{{ range(1, 10, 3) | list }}|{{ dict(a=1) }}",
     "{}",
     "122|SHOUT|[0, 1, 2][1, 4, 7]|{'a': 1}"},
    {"{{ [3, 1, 2, 1] | sort(reverse=true) }}|{{ users | sort(attribute='age') | map(attribute='n') | join }}|{{ users | sort(attribute='age', reverse=true) | map(attribute='n') | join }}|{{ ['b', 'B', 'a'] | sort(case_sensitive=true) }}|{{ d | dictsort(by='value', reverse=true) }}",
     "{\"users\": [{\"n\": \"a\", \"age\": 3}, {\"n\": \"b\", \"age\": 1}, {\"n\": \"c\", \"age\": 3}, {\"n\": \"d\", \"age\": 1}], \"d\": {\"x\": 1, \"y\": 3, \"z\": 2}}",
     "[3, 2, 1, 1]|bdac|acbd|['B', 'a', 'b']|[('y', 3), ('z', 2), ('x', 1)]"},
    {"{{ 'ab'.replace('', '-') }}|{{ 'ab'.replace('', '-', 1) }}|{{ 'abcabc'.find('c') }}|{{ 'abcabc'.count('bc') }}|{{ 'abc'.count('') }}|{{ 'x'.find('y') }}|{{ 'a.b.c'.split('.', 1) }}|{{ '' in 'abc' }}|{{ 'héllo wörld'.upper() }}",
     "{}",
     "-a-b-|-ab|2|2|4|-1|['a', 'b.c']|True|HÉLLO WÖRLD"},
    {"{{ x | tojson(ensure_ascii=true) }}|{{ x | tojson(separators=(',', ':')) }}|{{ x | tojson(indent=1, sort_keys=true) }}|{{ [[], {}, [1, [2]]] | tojson(indent=2) }}",
     "{\"x\": {\"\\u00e9\": \"\\ud83d\\ude00 \\u00fc\\u0001\", \"a\": [1.0, -2]}}",
     "{\"\\u00e9\": \"\\ud83d\\ude00 \\u00fc\\u0001\", \"a\": [1.0, -2]}|{\"é\":\"😀 ü\\u0001\",\"a\":[1.0,-2]}|{\n \"a\": [\n  1.0,\n  -2\n ],\n \"é\": \"😀 ü\\u0001\"\n}|[\n  [],\n  {},\n  [\n    1,\n    [\n      2\n    ]\n  ]\n]"},
    {"{{ '\\u00e9\\x41\\101\\U0001F600|\\d|\\'|' }}{{ \"a\\\"b\" }}",
     "{}",
     "éAA😀|\\d|'|a\"b"},
};

/* Render tmpl with the JSON context; returns the status, output in sb, message in err. */
static int render(const char *tmpl, const char *ctx_json, const struct jinja_opts *opts,
                  size_t budget, struct strbuf *sb, struct glim_err *err)
{
    struct jinja_template *t = NULL;
    struct jinja_arena *a = jinja_arena_new(budget);
    struct jinja_value ctx;
    struct jinja_opts o = opts ? *opts : (struct jinja_opts){0};
    o.clock = pinned_clock;
    int rc = jinja_template_new(tmpl, strlen(tmpl), &t, err);
    if (!rc)
        rc = jinja_json_parse(a, ctx_json, strlen(ctx_json), &ctx, err);
    if (!rc)
        rc = jinja_render(t, a, ctx, &o, sb, err);
    jinja_template_free(t);
    jinja_arena_free(a);
    return rc;
}

static void test_cases_match_jinja2(void)
{
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        struct strbuf sb;
        struct glim_err err = {0};
        strbuf_init(&sb);
        int rc = render(CASES[i].tmpl, CASES[i].ctx_json, NULL, 0, &sb, &err);
        CHECK_EQ(rc, GLIM_OK);
        bool same = !strcmp(strbuf_cstr(&sb), CASES[i].want);
        CHECK(same);
        if (rc || !same)
            fprintf(stderr, "case %zu: %s\n  got:  [%s]\n  want: [%s]\n  err: %s\n", i, CASES[i].tmpl,
                    strbuf_cstr(&sb), CASES[i].want, err.msg);
        strbuf_clear(&sb);
    }
}

/* Expect failure with code and a message containing each of the fragments. */
static void expect_error(const char *tmpl, const struct jinja_opts *opts, size_t budget, int code,
                         const char *frag1, const char *frag2)
{
    struct strbuf sb;
    struct glim_err err = {0};
    strbuf_init(&sb);
    int rc = render(tmpl, "{\"x\": 1}", opts, budget, &sb, &err);
    CHECK_EQ(rc, code);
    bool has = strstr(err.msg, frag1) && (!frag2 || strstr(err.msg, frag2));
    CHECK(has);
    if (rc != code || !has)
        fprintf(stderr, "template %.60s: rc %d, message: %s\n", tmpl, rc, err.msg);
    strbuf_clear(&sb);
}

static void test_syntax_errors_have_position(void)
{
    expect_error("hello\n  {% frobnicate x %}", NULL, 0, GLIM_EINVAL, "line 2 col 6", "unknown tag 'frobnicate'");
    expect_error("{{ x }}\n{{ x | nosuch(1) }}", NULL, 0, GLIM_EINVAL, "line 2 col 8", "no filter named 'nosuch'");
    expect_error("{% if x is wobbly %}{% endif %}", NULL, 0, GLIM_EINVAL, "line 1 col 12", "no test named 'wobbly'");
    expect_error("{% if x %}\nyes", NULL, 0, GLIM_EINVAL, "line 2", "expected 'endif'");
    expect_error("{{ 1 + }}", NULL, 0, GLIM_EINVAL, "line 1 col 8", "unexpected end of print statement");
    expect_error("{{ 'abc }}", NULL, 0, GLIM_EINVAL, "line 1 col 4", "unterminated string");
    expect_error("{# never closed", NULL, 0, GLIM_EINVAL, "line 1", "unterminated comment");
    expect_error("{% for %}{% endfor %}", NULL, 0, GLIM_EINVAL, "line 1 col 8", "expected a variable name");
    expect_error("{{ x $ 1 }}", NULL, 0, GLIM_EINVAL, "line 1 col 6", "unexpected character");
    expect_error("{% endif %}", NULL, 0, GLIM_EINVAL, "line 1 col 4", "unknown tag 'endif'");
}

static void test_runtime_errors(void)
{
    expect_error("{{ raise_exception('bad role: ' ~ x) }}", NULL, 0, GLIM_EINVAL, "bad role: 1", NULL);
    expect_error("{{ nope.attr }}", NULL, 0, GLIM_EINVAL, "'nope' is undefined", "line 1 col");
    expect_error("{{ nope + 1 }}", NULL, 0, GLIM_EINVAL, "'nope' is undefined", NULL);
    expect_error("{{ nope() }}", NULL, 0, GLIM_EINVAL, "'nope' is undefined", NULL);
    expect_error("{{ nope < 1 }}", NULL, 0, GLIM_EINVAL, "'nope' is undefined", NULL);
    expect_error("{{ 1 + 'a' }}", NULL, 0, GLIM_EINVAL, "unsupported operand type(s) for +: 'int' and 'str'", NULL);
    expect_error("{{ 1 // 0 }}", NULL, 0, GLIM_EINVAL, "division or modulo by zero", NULL);
    expect_error("{{ 9223372036854775807 + 1 }}", NULL, 0, GLIM_ERANGE, "integer overflow", NULL);
    expect_error("{{ x | tojson }}{{ namespace() | tojson }}", NULL, 0, GLIM_EINVAL, "not JSON serializable", NULL);
    expect_error("{% set l = [] %}{{ l.append(1) }}", NULL, 0, GLIM_EINVAL, "unsafe", NULL);
    expect_error("{% for a, b in [[1, 2, 3]] %}{% endfor %}", NULL, 0, GLIM_EINVAL, "cannot unpack", NULL);
}

static void test_limits(void)
{
    /* deep nesting in the source is refused by the parser, not by the C stack */
    char deep[20000];
    size_t n = 0;
    n += (size_t)sprintf(deep + n, "{{ ");
    for (int i = 0; i < 5000; i++)
        deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 5000; i++)
        deep[n++] = ')';
    strcpy(deep + n, " }}");
    expect_error(deep, NULL, 0, GLIM_EINVAL, "nested too deeply", NULL);
    n = 0;
    for (int i = 0; i < 1000; i++)
        n += (size_t)sprintf(deep + n, "{%% if 1 %%}");
    expect_error(deep, NULL, 0, GLIM_EINVAL, "nested too deeply", NULL);
    n = (size_t)sprintf(deep, "{{ ");
    for (int i = 0; i < 3000; i++)
        n += (size_t)sprintf(deep + n, "not ");
    strcpy(deep + n, "1 }}");
    expect_error(deep, NULL, 0, GLIM_EINVAL, "nested too deeply", NULL);

    /* unbounded macro recursion */
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, 0, GLIM_ERANGE,
                 "macro calls nested deeper than 64", NULL);
    /* huge loops stop at the step budget */
    struct jinja_opts small = {.max_steps = 200000, .max_output_bytes = 1 << 20};
    expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", &small, 0,
                 GLIM_ERANGE, "render exceeded 200000 steps", NULL);
    /* output size */
    expect_error("{% for i in range(1000) %}{{ 'x' * 100000 }}{% endfor %}", &small, 0, GLIM_ERANGE,
                 "output exceeds 1048576 bytes", NULL);
    /* memory: a doubling string runs into the arena budget */
    expect_error("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 NULL, 16 << 20, GLIM_ENOMEM, "out of memory", NULL);
    expect_error("{{ range(100000000) | length }}", NULL, 0, GLIM_ERANGE, "range too big", NULL);
    expect_error("{{ range(300000) | reverse | sort | unique | length }}", &small, 0, GLIM_ERANGE,
                 "render exceeded 200000 steps", NULL);
    /* printing multiplies sizes without allocating them: bounded as well */
    expect_error("{% set a = ['x' * 1000] * 1000 %}{% set b = [a] * 1000 %}{{ b }}", NULL, 0, GLIM_ERANGE,
                 "too large to print", NULL);
    expect_error("{% set a = ['x' * 1000] * 1000 %}{{ ([a] * 1000) | join }}", &small, 0, GLIM_ERANGE,
                 "join result exceeds 1048576 bytes", NULL);
    expect_error("{% set a = 'x' * 100000 %}{{ a.join([a] * 10000) }}", &small, 0, GLIM_ERANGE,
                 "join result exceeds 1048576 bytes", NULL);
    /* a namespace holding itself prints without recursing forever */
    struct strbuf sb;
    struct glim_err err = {0};
    strbuf_init(&sb);
    CHECK_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}{{ ns.me.me.me is defined }}", "{}",
                    NULL, 0, &sb, &err), GLIM_OK);
    CHECK(!strcmp(strbuf_cstr(&sb), "<Namespace>True"));
    strbuf_clear(&sb);
}

static void test_json_input(void)
{
    struct jinja_arena *a = jinja_arena_new(0);
    struct jinja_value v;
    struct glim_err err = {0};
    const char *doc = "{\"b\": [1, -2.5e3, true, null, \"\\u00e9\\ud83d\\ude00\\n\"], \"a\": {}}";
    CHECK_EQ(jinja_json_parse(a, doc, strlen(doc), &v, &err), GLIM_OK);
    struct strbuf sb;
    strbuf_init(&sb);
    CHECK_EQ(jinja_to_json(&sb, v, NULL, &err), GLIM_OK);
    CHECK(!strcmp(strbuf_cstr(&sb), "{\"b\": [1, -2500.0, true, null, \"\xc3\xa9\xf0\x9f\x98\x80\\n\"], \"a\": {}}"));
    strbuf_reset(&sb);
    CHECK_EQ(jinja_to_str(&sb, v, &err), GLIM_OK);
    CHECK(!strcmp(strbuf_cstr(&sb), "{'b': [1, -2500.0, True, None, '\xc3\xa9\xf0\x9f\x98\x80\\n'], 'a': {}}"));
    strbuf_clear(&sb);
    char deep[5000];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = '\0';
    CHECK_EQ(jinja_json_parse(a, deep, strlen(deep), &v, &err), GLIM_EFORMAT);
    CHECK(strstr(err.msg, "nested too deeply") != NULL);
    CHECK_EQ(jinja_json_parse(a, "[1,]", 4, &v, &err), GLIM_EFORMAT);
    CHECK_EQ(jinja_json_parse(a, "\"\\x\"", 4, &v, &err), GLIM_EFORMAT);
    CHECK_EQ(jinja_json_parse(a, "{\"a\" 1}", 7, &v, &err), GLIM_EFORMAT);
    CHECK_EQ(jinja_json_parse(a, "12 13", 5, &v, &err), GLIM_EFORMAT);
    jinja_arena_free(a);
}

static void test_python_float_repr(void)
{
    static const struct { double v; const char *want; } F[] = {
        {0.1, "0.1"}, {1e16, "1e+16"}, {1e15, "1000000000000000.0"},
        {9999999999999998.0, "9999999999999998.0"}, {123456789.123, "123456789.123"},
        {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"}, {-0.0, "-0.0"},
        {2.5e-5, "2.5e-05"}, {0.0001, "0.0001"}, {1e22, "1e+22"}, {-3.75e-7, "-3.75e-07"},
        {100.0, "100.0"}, {0.00012, "0.00012"},
    };
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        char buf[40];
        jinja_fmt_float(F[i].v, buf);
        CHECK(!strcmp(buf, F[i].want));
        if (strcmp(buf, F[i].want))
            fprintf(stderr, "float %zu: got %s want %s\n", i, buf, F[i].want);
    }
}

/* Values built from C render like JSON ones; undefined keys read as undefined. */
static void test_c_values(void)
{
    struct jinja_arena *a = jinja_arena_new(0);
    struct jinja_value ctx, list, s;
    CHECK_EQ(jinja_dict_new(a, &ctx), GLIM_OK);
    CHECK_EQ(jinja_list_new(a, &list), GLIM_OK);
    CHECK_EQ(jinja_cstr(a, "héllo", &s), GLIM_OK);
    CHECK_EQ(jinja_list_push(a, list, s), GLIM_OK);
    CHECK_EQ(jinja_list_push(a, list, jinja_float(0.5)), GLIM_OK);
    CHECK_EQ(jinja_dict_setc(a, ctx, "items", list), GLIM_OK);
    CHECK_EQ(jinja_dict_setc(a, ctx, "items", list), GLIM_OK);   /* replaces, does not duplicate */
    CHECK_EQ(jinja_len(ctx), 1);
    CHECK_EQ(jinja_len(s), 5);
    CHECK(jinja_dict_getc(ctx, "missing").type == JINJA_UNDEFINED);
    struct jinja_template *t = NULL;
    struct glim_err err = {0};
    const char *src = "{{ items }} {{ items | tojson }} {{ items[0] | upper }}";
    CHECK_EQ(jinja_template_new(src, strlen(src), &t, &err), GLIM_OK);
    struct strbuf sb;
    strbuf_init(&sb);
    CHECK_EQ(jinja_render(t, a, ctx, NULL, &sb, &err), GLIM_OK);
    CHECK(!strcmp(strbuf_cstr(&sb), "['héllo', 0.5] [\"héllo\", 0.5] HÉLLO"));
    strbuf_clear(&sb);
    jinja_template_free(t);
    jinja_arena_free(a);
}

int main(void)
{
    setenv("TZ", "UTC", 1);
    tzset();
    RUN(test_cases_match_jinja2);
    RUN(test_syntax_errors_have_position);
    RUN(test_runtime_errors);
    RUN(test_limits);
    RUN(test_json_input);
    RUN(test_python_float_repr);
    RUN(test_c_values);
    return DONE();
}
