/* qf_nats_admin.c - streams and consumers at the server: create, inspect,
 * delete. Thin wrappers over libnats's JetStream API requests, so that
 * programs (and tests) need no libnats header to set up a stream. */
#include <stdlib.h>
#include <string.h>

#include "qf_nats-impl.h"

static qf_code check(qf_nats *n, const char *name, const char *what, const char *fn)
{
    if (!n)
        return qf_set_error(QF_INVALID_ARGUMENT, "%s: n is NULL", fn);
    if (!name || !*name || strpbrk(name, " .*>\t\r\n"))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "%s: %s must be a name without spaces, '.', '*' or '>'", fn, what);
    return qf__nats_not_in_task(fn);
}

static qf_code not_found_or(natsStatus s, jsErrCode jerr, const char *kind, const char *name,
                            const char *doing)
{
    if (jerr == JSStreamNotFoundErr)
        return qf_set_error(QF_NOT_FOUND, "NATS stream '%s' not found", name);
    if (jerr == JSConsumerNotFoundErr)
        return qf_set_error(QF_NOT_FOUND, "NATS consumer '%s' not found", name);
    return qf__nats_error(s, jerr, "NATS %s '%s': %s", kind, name, doing);
}

static bool same_subjects(const jsStreamConfig *have, const char *const *want, size_t n)
{
    if (!have || have->SubjectsLen != (int)n)
        return false;
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        for (int k = 0; k < have->SubjectsLen && !found; k++)
            found = strcmp(have->Subjects[k], want[i]) == 0;
        if (!found)
            return false;
    }
    return true;
}

qf_code qf_nats_stream_create(qf_nats *n, const qf_nats_stream_options *o)
{
    qf_code rc = check(n, o ? o->name : NULL, "the stream name", "qf_nats_stream_create");
    if (rc != QF_OK)
        return rc;
    if (o->replicas < 0 || o->duplicate_window_s < 0 || o->max_msg_size < 0 ||
        (o->n_subjects && !o->subjects))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_nats_stream_create: negative replicas, duplicate_window_s or "
                            "max_msg_size, or subjects NULL with n_subjects %zu",
                            o->n_subjects);
    const char *one[1] = {o->name};
    const char *const *subjects = o->n_subjects ? o->subjects : one;
    size_t ns = o->n_subjects ? o->n_subjects : 1;
    for (size_t i = 0; i < ns; i++)
        if (!subjects[i] || !*subjects[i])
            return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_stream_create: subject %zu is empty",
                                i);
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = o->name;
    cfg.Subjects = (const char **)subjects;
    cfg.SubjectsLen = (int)ns;
    cfg.Replicas = o->replicas ? o->replicas : 1;
    cfg.Retention = o->work_queue ? js_WorkQueuePolicy : js_LimitsPolicy;
    cfg.Storage = o->memory ? js_MemoryStorage : js_FileStorage;
    if (o->duplicate_window_s > 0)
        cfg.Duplicates = (int64_t)(o->duplicate_window_s * 1e9);
    if (o->max_msg_size > 0)
        cfg.MaxMsgSize = o->max_msg_size;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_AddStream(&si, n->js, &cfg, NULL, &jerr);
    if (s == NATS_OK) {
        jsStreamInfo_Destroy(si);
        return QF_OK;
    }
    if (jerr == JSStreamNameExistErr) {
        /* there already: fine if it captures the same subjects */
        jsErrCode j2 = 0;
        natsStatus s2 = js_GetStreamInfo(&si, n->js, o->name, NULL, &j2);
        bool same = s2 == NATS_OK && same_subjects(si->Config, subjects, ns);
        jsStreamInfo_Destroy(si);
        if (same)
            return QF_OK;
        return qf_set_error(QF_ALREADY_EXISTS,
                            "NATS stream '%s' exists with other subjects or settings", o->name);
    }
    return qf__nats_error(s, jerr, "NATS stream '%s': creating", o->name);
}

qf_code qf_nats_stream_delete(qf_nats *n, const char *name)
{
    qf_code rc = check(n, name, "the stream name", "qf_nats_stream_delete");
    if (rc != QF_OK)
        return rc;
    jsErrCode jerr = 0;
    natsStatus s = js_DeleteStream(n->js, name, NULL, &jerr);
    return s == NATS_OK ? QF_OK : not_found_or(s, jerr, "stream", name, "deleting");
}

static void copy_leader(char dst[64], const jsClusterInfo *ci)
{
    dst[0] = 0;
    if (ci && ci->Leader) {
        strncpy(dst, ci->Leader, 63);
        dst[63] = 0;
    }
}

qf_code qf_nats_stream_get_info(qf_nats *n, const char *name, qf_nats_stream_info *ret)
{
    qf_code rc = check(n, name, "the stream name", "qf_nats_stream_info");
    if (rc != QF_OK)
        return rc;
    if (!ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_stream_info: ret is NULL");
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, n->js, name, NULL, &jerr);
    if (s != NATS_OK)
        return not_found_or(s, jerr, "stream", name, "reading its state");
    qf_nats_stream_info out = {
        .messages = si->State.Msgs,
        .bytes = si->State.Bytes,
        .first_seq = si->State.FirstSeq,
        .last_seq = si->State.LastSeq,
        .replicas = si->Config ? (int)si->Config->Replicas : 1,
    };
    copy_leader(out.leader, si->Cluster);
    jsStreamInfo_Destroy(si);
    *ret = out;
    return QF_OK;
}

qf_code qf_nats_consumer_get_info(qf_nats *n, const char *stream, const char *durable,
                                  qf_nats_consumer_info *ret)
{
    qf_code rc = check(n, stream, "the stream name", "qf_nats_consumer_info");
    if (rc == QF_OK)
        rc = check(n, durable, "the durable name", "qf_nats_consumer_info");
    if (rc != QF_OK)
        return rc;
    if (!ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_consumer_info: ret is NULL");
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetConsumerInfo(&ci, n->js, stream, durable, NULL, &jerr);
    if (s != NATS_OK)
        return not_found_or(s, jerr, jerr == JSStreamNotFoundErr ? "stream" : "consumer",
                            jerr == JSStreamNotFoundErr ? stream : durable, "reading its state");
    qf_nats_consumer_info out = {
        .num_pending = ci->NumPending,
        .num_ack_pending = ci->NumAckPending,
        .num_redelivered = ci->NumRedelivered,
        .delivered_stream_seq = ci->Delivered.Stream,
        .ack_floor_stream_seq = ci->AckFloor.Stream,
        .num_waiting = ci->NumWaiting,
    };
    copy_leader(out.leader, ci->Cluster);
    jsConsumerInfo_Destroy(ci);
    *ret = out;
    return QF_OK;
}

qf_code qf_nats_consumer_delete(qf_nats *n, const char *stream, const char *durable)
{
    qf_code rc = check(n, stream, "the stream name", "qf_nats_consumer_delete");
    if (rc == QF_OK)
        rc = check(n, durable, "the durable name", "qf_nats_consumer_delete");
    if (rc != QF_OK)
        return rc;
    jsErrCode jerr = 0;
    natsStatus s = js_DeleteConsumer(n->js, stream, durable, NULL, &jerr);
    return s == NATS_OK ? QF_OK
                        : not_found_or(s, jerr, jerr == JSStreamNotFoundErr ? "stream" : "consumer",
                                       jerr == JSStreamNotFoundErr ? stream : durable, "deleting");
}
