/* text/text.h — XLA's HLO text format: the printer and the parser (lex.c, parse.c,
   parse_attrs.c, print.c). Stands on the IR only. */
#ifndef HLOJIT_TEXT_H
#define HLOJIT_TEXT_H

#include "../ir/ir.h"

/* ---- print.c: HLO text printer -- ----------------------------------------------------
   Writes text XLA's parser reads: `HloModule name, entry_computation_layout={...}`, then
   each computation `name {` ... `}` (callees first, `ENTRY` on the entry, `ROOT` on roots),
   every instruction with its full shape and layout, operands by name. */
hj_status hlo_print_module(const hlo_module *m, char **out);  /* *out malloc'd */
void hlo_print_instr(char **sb, const hlo_instr *ins);         /* one line, no newline */
void hlo_print_literal(char **sb, const hlo_literal *l);       /* `{1, 2}` / `1.5` / `(..)` */

/* ---- parse.c: HLO text parser -- ----------------------------------------------------- */
hj_status hlo_parse_module(hj_ctx_t *ctx, const char *text, size_t len, const char *filename,
                           hlo_module **out);


#endif /* HLOJIT_TEXT_H */
