/*
 * thin.c - a series thinned while it is written (thin.h).
 */
#include <stdio.h>
#include <string.h>

#include "thin.h"

void tg_thin_init(struct tg_thin *t, tg_thin_write_fn write, void *ctx, double x0, double x1,
		  size_t columns)
{
	t->write = write;
	t->ctx = ctx;
	t->x0 = x0;
	t->x1 = x1;
	t->columns = columns;
	t->col = -1;
	t->order = 0;
}

static void thin_set(struct tg_thin_pt *p, const void *data, size_t len, double y,
		     size_t order)
{
	if (len > sizeof(p->data))
		len = sizeof(p->data);
	memcpy(p->data, data, len);
	p->len = len;
	p->y = y;
	p->order = order;
}

/* The slice's points, each once, in their order. */
static void thin_flush(struct tg_thin *t)
{
	struct tg_thin_pt *v[4];
	size_t k = 0;

	for (int i = 0; i < 4; i++) {
		int dup = 0;
		for (size_t j = 0; j < k; j++)
			dup |= v[j]->order == t->keep[i].order;
		if (!dup)
			v[k++] = &t->keep[i];
	}
	for (size_t i = 1; i < k; i++)  /* insertion sort by order: k <= 4 */
		for (size_t j = i; j > 0 && v[j - 1]->order > v[j]->order; j--) {
			struct tg_thin_pt *s = v[j];
			v[j] = v[j - 1];
			v[j - 1] = s;
		}
	for (size_t j = 0; j < k; j++)
		t->write(t->ctx, v[j]->data, v[j]->len);
}

void tg_thin_point(struct tg_thin *t, double x, double y, const void *line, size_t len)
{
	long c;

	if (!t->columns) {
		t->write(t->ctx, line, len);
		return;
	}
	c = t->x1 > t->x0 ? (long)((x - t->x0) / (t->x1 - t->x0) * (double)t->columns) : 0;
	if (c != t->col) {
		if (t->col != -1)
			thin_flush(t);
		t->col = c;
		for (int i = 0; i < 4; i++)
			thin_set(&t->keep[i], line, len, y, t->order);
	} else {
		if (y < t->keep[1].y)
			thin_set(&t->keep[1], line, len, y, t->order);
		if (y > t->keep[2].y)
			thin_set(&t->keep[2], line, len, y, t->order);
		thin_set(&t->keep[3], line, len, y, t->order);
	}
	t->order++;
}

void tg_thin_finish(struct tg_thin *t)
{
	/* as a slice -2 would end it (the series once ended at "slice" -2) */
	if (t->columns && t->col != -1 && t->col != -2)
		thin_flush(t);
	t->col = -1;
}

void tg_thin_fwrite(void *ctx, const void *data, size_t len)
{
	fwrite(data, 1, len, ctx);
}
