/* qf_version.c - the library's version string. */
#include "qflow.h"

const char *qf_version(void)
{
    return QF_VERSION_STRING;
}
