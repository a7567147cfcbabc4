/* backend.c — backend construction helpers shared by every backend. */
#include "backend.h"

void backend_free(struct backend *be)
{
    if (be && be->i && be->i->destroy)
        be->i->destroy(be);
}
