/* SPDX-License-Identifier: Apache-2.0 */
/* Shape arithmetic: a small recursive-descent evaluator for dimension expressions.
 *
 *   expr    := term (('+' | '-') term)*
 *   term    := unary (('*' | '/') unary)*
 *   unary   := ('+' | '-')* primary
 *   primary := INTEGER | NAME | '(' expr ')'
 *
 * Every value is linear in the symbolic batch (mul * batch + add); the operations
 * that would leave that form (batch*batch, division by a batch-dependent value,
 * inexact division) are errors, as is int64 overflow anywhere. */
#include <stdio.h>
#include <string.h>

#include "frontend/frontend.h"
#include "util/util.h"

/* Parenthesis nesting bound: keeps the recursion shallow on hostile input. No real
 * shape needs more than a handful of levels. */
#define HKC_DIMEXPR_MAX_DEPTH 64
/* How much of the expression text is quoted back in messages. */
#define HKC_DIMEXPR_QUOTE_MAX 80

typedef struct dimexpr_parser {
  const char *text;
  size_t pos;
  const hkc_named_dim_t *dims;
  size_t n_dims;
  hkc_loc_t loc;
  int depth;
  int failed; /* an error was reported; stop at once */
} dimexpr_parser_t;

static int parse_expr(dimexpr_parser_t *p, hkc_dim_t *out);

/* Reports at the column of byte `at` in the expression. Only the first error counts. */
static void dimexpr_fail(dimexpr_parser_t *p, size_t at, const char *what) {
  if (p->failed) return;
  p->failed = 1;
  hkc_loc_t loc = p->loc;
  if (loc.line > 0 && loc.col > 0) loc.col += (int)at;
  hkc_error(loc, "in shape expression '%.*s': %s", HKC_DIMEXPR_QUOTE_MAX, p->text, what);
}

/* "768" or "128*batch" or "2*batch + 3": a linear value in words. */
static void dim_format(hkc_dim_t d, char *out, size_t size) {
  if (d.mul == 0)
    snprintf(out, size, "%lld", (long long)d.add);
  else if (d.add == 0)
    snprintf(out, size, "%lld*batch", (long long)d.mul);
  else
    snprintf(out, size, "%lld*batch %c %llu", (long long)d.mul, d.add < 0 ? '-' : '+',
             d.add < 0 ? 0ull - (unsigned long long)d.add : (unsigned long long)d.add);
}

static int is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

static void skip_space(dimexpr_parser_t *p) {
  while (p->text[p->pos] == ' ' || p->text[p->pos] == '\t') p->pos++;
}

static int parse_primary(dimexpr_parser_t *p, hkc_dim_t *out) {
  skip_space(p);
  size_t start = p->pos;
  char c = p->text[start];
  if (c >= '0' && c <= '9') {
    int64_t v = 0;
    while (p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, p->text[p->pos] - '0', &v)) {
        dimexpr_fail(p, start, "integer too large");
        return -1;
      }
      p->pos++;
    }
    if (p->text[p->pos] == '.' || p->text[p->pos] == 'e' || p->text[p->pos] == 'E') {
      dimexpr_fail(p, start, "not an integer (dimensions are whole numbers)");
      return -1;
    }
    out->mul = 0;
    out->add = v;
    return 0;
  }
  if (is_name_start(c)) {
    while (is_name_char(p->text[p->pos])) p->pos++;
    size_t len = p->pos - start;
    if (len == 5 && memcmp(p->text + start, "batch", 5) == 0) {
      out->mul = 1;
      out->add = 0;
      return 0;
    }
    for (size_t i = 0; i < p->n_dims; i++) {
      if (strlen(p->dims[i].name) == len && memcmp(p->dims[i].name, p->text + start, len) == 0) {
        out->mul = 0;
        out->add = p->dims[i].value;
        return 0;
      }
    }
    char msg[512];
    int n = snprintf(msg, sizeof msg, "unknown dim '%.*s' (known: batch", (int)(len > 64 ? 64 : len),
                     p->text + start);
    for (size_t i = 0; i < p->n_dims && n > 0 && (size_t)n < sizeof msg - 80; i++)
      n += snprintf(msg + n, sizeof msg - (size_t)n, ", %s", p->dims[i].name);
    if (n > 0 && (size_t)n < sizeof msg) snprintf(msg + n, sizeof msg - (size_t)n, ")");
    dimexpr_fail(p, start, msg);
    return -1;
  }
  if (c == '(') {
    if (++p->depth > HKC_DIMEXPR_MAX_DEPTH) {
      dimexpr_fail(p, start, "parentheses nested too deeply");
      return -1;
    }
    p->pos++;
    if (parse_expr(p, out) != 0) return -1;
    skip_space(p);
    if (p->text[p->pos] != ')') {
      dimexpr_fail(p, p->pos, "expected ')'");
      return -1;
    }
    p->pos++;
    p->depth--;
    return 0;
  }
  if (c == '\0')
    dimexpr_fail(p, start, start == 0 ? "empty expression" : "expected a number, a dim name or '(' at the end");
  else {
    char msg[96];
    snprintf(msg, sizeof msg, "unexpected '%c' (expected a number, a dim name or '(')", c);
    dimexpr_fail(p, start, msg);
  }
  return -1;
}

static int parse_unary(dimexpr_parser_t *p, hkc_dim_t *out) {
  int negate = 0;
  skip_space(p);
  size_t start = p->pos;
  while (p->text[p->pos] == '-' || p->text[p->pos] == '+') {
    if (p->text[p->pos] == '-') negate = !negate;
    p->pos++;
    skip_space(p);
  }
  if (parse_primary(p, out) != 0) return -1;
  if (negate) {
    if (__builtin_sub_overflow((int64_t)0, out->mul, &out->mul) ||
        __builtin_sub_overflow((int64_t)0, out->add, &out->add)) {
      dimexpr_fail(p, start, "integer overflow");
      return -1;
    }
  }
  return 0;
}

static int apply_mul(dimexpr_parser_t *p, size_t at, hkc_dim_t a, hkc_dim_t b, hkc_dim_t *out) {
  if (a.mul != 0 && b.mul != 0) {
    dimexpr_fail(p, at, "batch times batch is not linear in batch (batch may appear only once per product)");
    return -1;
  }
  hkc_dim_t r;
  int ovf;
  if (a.mul != 0)
    ovf = __builtin_mul_overflow(a.mul, b.add, &r.mul);
  else
    ovf = __builtin_mul_overflow(b.mul, a.add, &r.mul);
  ovf |= __builtin_mul_overflow(a.add, b.add, &r.add);
  if (ovf) {
    dimexpr_fail(p, at, "integer overflow in '*'");
    return -1;
  }
  *out = r;
  return 0;
}

static int apply_div(dimexpr_parser_t *p, size_t at, hkc_dim_t a, hkc_dim_t b, hkc_dim_t *out) {
  char msg[256], sa[64];
  if (b.mul != 0) {
    dimexpr_fail(p, at, "division by a batch-dependent value");
    return -1;
  }
  if (b.add == 0) {
    dimexpr_fail(p, at, "division by zero");
    return -1;
  }
  if (b.add == -1 && (a.mul == INT64_MIN || a.add == INT64_MIN)) {
    dimexpr_fail(p, at, "integer overflow in '/'");
    return -1;
  }
  if (a.mul % b.add != 0 || a.add % b.add != 0) {
    dim_format(a, sa, sizeof sa);
    snprintf(msg, sizeof msg, "inexact division: %s is not divisible by %lld", sa, (long long)b.add);
    dimexpr_fail(p, at, msg);
    return -1;
  }
  out->mul = a.mul / b.add;
  out->add = a.add / b.add;
  return 0;
}

static int parse_term(dimexpr_parser_t *p, hkc_dim_t *out) {
  if (parse_unary(p, out) != 0) return -1;
  for (;;) {
    skip_space(p);
    char op = p->text[p->pos];
    if (op != '*' && op != '/') return 0;
    size_t at = p->pos++;
    hkc_dim_t rhs;
    if (parse_unary(p, &rhs) != 0) return -1;
    if ((op == '*' ? apply_mul(p, at, *out, rhs, out) : apply_div(p, at, *out, rhs, out)) != 0) return -1;
  }
}

static int parse_expr(dimexpr_parser_t *p, hkc_dim_t *out) {
  if (parse_term(p, out) != 0) return -1;
  for (;;) {
    skip_space(p);
    char op = p->text[p->pos];
    if (op != '+' && op != '-') return 0;
    size_t at = p->pos++;
    hkc_dim_t rhs;
    if (parse_term(p, &rhs) != 0) return -1;
    int ovf;
    if (op == '+') {
      ovf = __builtin_add_overflow(out->mul, rhs.mul, &out->mul);
      ovf += __builtin_add_overflow(out->add, rhs.add, &out->add);
    } else {
      ovf = __builtin_sub_overflow(out->mul, rhs.mul, &out->mul);
      ovf += __builtin_sub_overflow(out->add, rhs.add, &out->add);
    }
    if (ovf) {
      dimexpr_fail(p, at, op == '+' ? "integer overflow in '+'" : "integer overflow in '-'");
      return -1;
    }
  }
}

/* Contract in frontend.h. The result must be a dimension: positive for every batch >= 1,
 * i.e. mul >= 0 and mul + add >= 1; anything else is reported at the first column. */
int hkc_dimexpr_eval(const char *text, const hkc_named_dim_t *dims, size_t n_dims, hkc_loc_t loc,
                     hkc_dim_t *out_dim) {
  dimexpr_parser_t p = {.text = text ? text : "", .dims = dims, .n_dims = n_dims, .loc = loc};
  hkc_dim_t d = {0, 0};
  if (parse_expr(&p, &d) != 0) return -1;
  skip_space(&p);
  if (p.text[p.pos] != '\0') {
    char msg[96];
    if (p.text[p.pos] == ')')
      snprintf(msg, sizeof msg, "unbalanced ')'");
    else
      snprintf(msg, sizeof msg, "unexpected '%c' (expected an operator + - * / or the end)", p.text[p.pos]);
    dimexpr_fail(&p, p.pos, msg);
    return -1;
  }
  int64_t at_one;
  if (d.mul < 0 || __builtin_add_overflow(d.mul, d.add, &at_one) || at_one < 1) {
    char sd[64], msg[160];
    dim_format(d, sd, sizeof sd);
    snprintf(msg, sizeof msg, "a dimension must be positive for every batch >= 1 (this one is %s)", sd);
    dimexpr_fail(&p, 0, msg);
    return -1;
  }
  *out_dim = d;
  return 0;
}
