/* test_element.c - elements: tuples of tensor references with names. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "qf_tensor.h"

/* Owned objects counting their destruction: an element that leaks or
 * double-releases a reference shows up as a count other than 1. */
#define MAX_OBJS 8
static int destroyed[MAX_OBJS];

static void obj_dtor(void *p)
{
    int *id = p;
    destroyed[*id]++;
    free(id);
}

static qf_tensor *owned(int id)
{
    int *p = malloc(sizeof(*p));
    cr_assert_not_null(p);
    *p = id;
    qf_tensor *t = qf_tensor_new_scalar_ptr(p, obj_dtor);
    cr_assert_not_null(t);
    return t;
}

static void reset(void)
{
    memset(destroyed, 0, sizeof(destroyed));
}

Test(element, new_accepts_one_to_4096_components)
{
    cr_assert_null(qf_element_new(0));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    cr_assert_null(qf_element_new(4097));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);

    qf_element *one = qf_element_new(1), *max = qf_element_new(4096);
    cr_assert_not_null(one);
    cr_assert_not_null(max);
    cr_assert_eq(qf_element_size(one), 1);
    cr_assert_eq(qf_element_size(max), 4096);
    for (size_t i = 0; i < 4096; i++)
        cr_assert_null(qf_element_get(max, i), "components start empty");
    cr_assert_not(qf_element_has_names(one));
    qf_element_free(one);
    qf_element_free(max);
}

Test(element, null_element_is_harmless)
{
    qf_element_free(NULL);
    cr_assert_eq(qf_element_size(NULL), 0);
    cr_assert_null(qf_element_get(NULL, 0));
    cr_assert_null(qf_element_take(NULL, 0));
    cr_assert_not(qf_element_has_names(NULL));
    cr_assert_null(qf_element_name(NULL, 0));
    cr_assert_null(qf_element_get_by_name(NULL, "a"));
    cr_assert_eq(qf_element_set_names(NULL, NULL), QF_INVALID_ARGUMENT);
}

Test(element, set_get_and_take_move_references)
{
    qf_element *e = qf_element_new(2);
    qf_tensor *t = qf_tensor_new_i32(5);
    cr_assert_eq(qf_element_set(e, 1, qf_tensor_ref(t)), QF_OK);
    cr_assert_eq(qf_element_get(e, 1), t, "borrowed");
    cr_assert_eq(qf_tensor_refcount(t), 2, "get does not add a reference");
    cr_assert_null(qf_element_get(e, 0));
    cr_assert_null(qf_element_get(e, 2));

    qf_tensor *taken = qf_element_take(e, 1);
    cr_assert_eq(taken, t);
    cr_assert_null(qf_element_get(e, 1));
    cr_assert_eq(qf_tensor_refcount(t), 2, "the element's reference moved to the caller");
    cr_assert_null(qf_element_take(e, 1), "nothing left");
    cr_assert_null(qf_element_take(e, 7));
    qf_tensor_unref(taken);

    qf_element_free(e);
    cr_assert_eq(qf_tensor_refcount(t), 1);
    qf_tensor_unref(t);
}

Test(element, set_releases_the_previous_tensor)
{
    reset();
    qf_element *e = qf_element_new(1);
    cr_assert_eq(qf_element_set(e, 0, owned(0)), QF_OK);
    cr_assert_eq(qf_element_set(e, 0, owned(1)), QF_OK);
    cr_assert_eq(destroyed[0], 1);
    cr_assert_eq(qf_element_set(e, 0, NULL), QF_OK);
    cr_assert_eq(destroyed[1], 1);
    qf_element_free(e);
    cr_assert_eq(destroyed[0], 1);
    cr_assert_eq(destroyed[1], 1);
}

Test(element, set_out_of_range_fails_and_consumes_the_reference)
{
    reset();
    qf_element *e = qf_element_new(2);
    cr_assert_eq(qf_element_set(e, 2, owned(0)), QF_INVALID_ARGUMENT);
    cr_assert_eq(destroyed[0], 1);
    cr_assert_eq(qf_element_set(NULL, 0, owned(1)), QF_INVALID_ARGUMENT);
    cr_assert_eq(destroyed[1], 1);
    qf_element_free(e);
}

Test(element, free_releases_every_reference)
{
    reset();
    qf_element *e = qf_element_new(3);
    qf_element_set(e, 0, owned(0));
    qf_element_set(e, 2, owned(2));
    qf_element_free(e);
    cr_assert_eq(destroyed[0], 1);
    cr_assert_eq(destroyed[1], 0);
    cr_assert_eq(destroyed[2], 1);
}

Test(element, element_of_takes_one_reference_of_each)
{
    reset();
    qf_tensor *a = qf_tensor_new_cstr("a");
    qf_tensor *ts[] = {qf_tensor_ref(a), owned(1), NULL};
    qf_element *e = qf_element_of(3, ts);
    cr_assert_not_null(e);
    cr_assert_eq(qf_element_size(e), 3);
    cr_assert_eq(qf_element_get(e, 0), a);
    cr_assert_eq(qf_tensor_refcount(a), 2, "no reference added");
    cr_assert_null(qf_element_get(e, 2));
    cr_assert_eq(destroyed[1], 0);
    qf_element_free(e);
    cr_assert_eq(destroyed[1], 1);
    cr_assert_eq(qf_tensor_refcount(a), 1);
    qf_tensor_unref(a);
}

Test(element, element_of_releases_references_on_failure)
{
    reset();
    qf_tensor *none[1] = {NULL};
    cr_assert_null(qf_element_of(0, none));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);

    qf_tensor **many = calloc(4097, sizeof(*many));
    cr_assert_not_null(many);
    many[0] = owned(0);
    many[4096] = owned(1);
    cr_assert_null(qf_element_of(4097, many));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
    cr_assert_eq(destroyed[0], 1);
    cr_assert_eq(destroyed[1], 1);
    free(many);

    cr_assert_null(qf_element_of(2, NULL));
    cr_assert_eq(qf_last_code(), QF_INVALID_ARGUMENT);
}

Test(element, names_are_copied_and_looked_up)
{
    qf_tensor *ts[] = {qf_tensor_new_i32(1), qf_tensor_new_i32(2)};
    qf_element *e = qf_element_of(2, ts);
    cr_assert_not(qf_element_has_names(e));
    cr_assert_null(qf_element_name(e, 0));
    cr_assert_null(qf_element_get_by_name(e, "x"));

    char first[] = "x", second[] = "label";
    const char *names[] = {first, second};
    cr_assert_eq(qf_element_set_names(e, names), QF_OK);
    first[0] = 'z'; /* the element keeps its own copy */
    cr_assert(qf_element_has_names(e));
    cr_assert_str_eq(qf_element_name(e, 0), "x");
    cr_assert_str_eq(qf_element_name(e, 1), "label");
    cr_assert_null(qf_element_name(e, 2));
    cr_assert_eq(qf_element_get_by_name(e, "x"), ts[0]);
    cr_assert_eq(qf_element_get_by_name(e, "label"), ts[1]);
    cr_assert_null(qf_element_get_by_name(e, "z"));
    cr_assert_null(qf_element_get_by_name(e, NULL));

    const char *renamed[] = {"a", "b"};
    cr_assert_eq(qf_element_set_names(e, renamed), QF_OK);
    cr_assert_str_eq(qf_element_name(e, 0), "a");
    cr_assert_null(qf_element_get_by_name(e, "x"));

    cr_assert_eq(qf_element_set_names(e, NULL), QF_OK);
    cr_assert_not(qf_element_has_names(e));
    cr_assert_null(qf_element_name(e, 0));
    qf_element_free(e);
}

Test(element, invalid_names_are_rejected_and_keep_the_old_ones)
{
    qf_element *e = qf_element_new(3);
    const char *good[] = {"a", "b", "c"};
    cr_assert_eq(qf_element_set_names(e, good), QF_OK);

    const char *dup[] = {"a", "b", "a"};
    cr_assert_eq(qf_element_set_names(e, dup), QF_INVALID_ARGUMENT);
    cr_assert_str_eq(qf_last_message(), "Duplicate name 'a' for components 0 and 2");
    const char *empty[] = {"a", "", "c"};
    cr_assert_eq(qf_element_set_names(e, empty), QF_INVALID_ARGUMENT);
    const char *missing[] = {"a", "b", NULL};
    cr_assert_eq(qf_element_set_names(e, missing), QF_INVALID_ARGUMENT);

    cr_assert_str_eq(qf_element_name(e, 0), "a");
    cr_assert_str_eq(qf_element_name(e, 1), "b");
    cr_assert_str_eq(qf_element_name(e, 2), "c");
    qf_element_free(e);
}
