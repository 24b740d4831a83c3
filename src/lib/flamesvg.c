/*
 * flamesvg.c - the interactive flame graph as SVG (flamesvg.h).
 *
 * Two walks over the tree, the same code: the first only measures (how deep,
 * how many frames drawn and hidden: the header needs them), the second writes.
 * The walk is iterative (a 100,000-deep recursion is a 100,000-deep tree) and
 * writes frames in pre-order: the script relies on it to count the share of
 * nested search matches once.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flamesvg.h"
#include "markup.h"
#include "tg_fnv.h"

#define FS_PAD 10          /* left and right margin, px */
#define FS_FRAME_H 17      /* row height, px */
#define FS_TOP 76          /* y of the root row */
#define FS_BOTTOM 30       /* room for the details line */
#define FS_CHAR_W 7.0      /* average width of a 12 px character, px */

/* What the walk visits: a frame, or a box standing for hidden siblings. */
struct fs_item {
	size_t node;           /* frame index, or TG_FOLD_NONE for a box */
	double off;            /* left edge, in the metric's units from the left (a double:
				* sums of saturated totals must not overflow) */
	int64_t value;         /* a box's summed value */
	size_t count;          /* a box's hidden frames */
	unsigned depth;
};

struct fs_walk {
	const struct tg_fold *f;
	const struct tg_flamesvg_opts *o;
	FILE *out;             /* NULL: measure only */
	double scale;          /* px per unit */
	double min_px;
	int width;
	struct fs_item *stack; /* items still to visit */
	size_t top, cap;
	size_t *kids;          /* scratch: the visible children of one frame */
	size_t kids_cap;
};

static int fs_push(struct fs_walk *w, const struct fs_item *it)
{
	if (w->top == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 256;
		struct fs_item *ns = realloc(w->stack, nc * sizeof(*ns));
		if (!ns)
			return -1;
		w->stack = ns;
		w->cap = nc;
	}
	w->stack[w->top++] = *it;
	return 0;
}

/* Writes V in the metric's unit for a person: "1,234 B (1.21 KB)". */
static void fs_value(FILE *out, const struct tg_fold *f, int64_t v)
{
	char g[32], s[32];

	tg_fmt_grouped(g, v);
	if (!strcmp(f->metric->unit, "us")) {
		double sec = (double)v / 1e6;
		if (sec >= 1)
			snprintf(s, sizeof(s), "%.3g s", sec);
		else
			snprintf(s, sizeof(s), "%.3g ms", sec * 1e3);
		fprintf(out, "%s us (%s)", g, s);
	} else {
		tg_fmt_bytes_short(s, v);
		if (v >= 1024 || v <= -1024)
			fprintf(out, "%s B (%s)", g, s);
		else
			fprintf(out, "%s B", g);
	}
}

/* Writes at most the first N characters of NAME, ".." ending a cut name. */
static void fs_label(FILE *out, const char *name, long n)
{
	const unsigned char *u = (const unsigned char *)name;
	size_t len = strlen(name), i = 0, l;
	long chars = 0, total = 0;

	if (n < 3)
		return;  /* no room for a readable label */
	for (i = 0; i < len; i += l ? l : 1, total++)
		l = tg_utf8_len(u + i, len - i);
	if (total <= n) {
		tg_xml_text(out, name, len);
		return;
	}
	for (i = 0; i < len && chars < n - 2; i += l ? l : 1, chars++)
		l = tg_utf8_len(u + i, len - i);
	tg_xml_text(out, name, i);
	fputs("..", out);
}

/* The fill of a frame: a colour from its name (same name, same colour). */
static void fs_fill(FILE *out, const struct tg_fold *f, size_t node)
{
	const char *name = node == TG_FOLD_NONE ? "" : tg_fold_name(f, node);
	uint64_t h;
	const char *paren;
	double v1, v2, v3;

	if (node == TG_FOLD_NONE) {
		fputs("#d8d8d8", out);
		return;
	}
	if (f->v[node].kind == TG_FOLD_ROOT) {
		fputs("#c8c8c8", out);
		return;
	}
	if (f->v[node].kind == TG_FOLD_THREAD) {
		fputs("#b8c0d8", out);
		return;
	}
	/* a task's marker frame "[LABEL]" (fold_stitch.h): where pool work was grafted */
	if (name[0] == '[' && name[strlen(name) - 1] == ']' && !strstr(name, " (")) {
		fputs("#e8d8a0", out);
		return;
	}
	/* the function name only: one function keeps its colour in every context */
	paren = strstr(name, " (");
	h = tg_fnv1a(TG_FNV_BASIS, name, paren ? (size_t)(paren - name) : strlen(name));
	v1 = (double)(h & 0xff) / 255.0;
	v2 = (double)((h >> 8) & 0xff) / 255.0;
	v3 = (double)((h >> 16) & 0xff) / 255.0;
	if (!strcmp(f->metric->unit, "us"))  /* warm, as time flame graphs are */
		fprintf(out, "rgb(%d,%d,%d)", 205 + (int)(50 * v3), (int)(230 * v1),
			(int)(55 * v2));
	else  /* greens and blues, as memory flame graphs are */
		fprintf(out, "rgb(%d,%d,%d)", (int)(60 * v3), 170 + (int)(70 * v2),
			90 + (int)(140 * v1));
}

/* Writes one item as <g class="f"> with its title, rectangle and label. */
static void fs_draw(struct fs_walk *w, const struct fs_item *it)
{
	const struct tg_fold *f = w->f;
	FILE *out = w->out;
	int64_t value = it->node == TG_FOLD_NONE ? it->value : f->v[it->node].total;
	double x = FS_PAD + it->off * w->scale, width = (double)value * w->scale;
	double y = FS_TOP + (double)it->depth * FS_FRAME_H;
	double pct = f->v[0].total ? 100.0 * (double)value / (double)f->v[0].total : 0;
	char name[64];
	const char *text = name;
	const char *cls = "f";

	if (it->node == TG_FOLD_NONE) {
		snprintf(name, sizeof(name), "[%zu small frames]", it->count);
		cls = "f m";
	} else {
		text = tg_fold_name(f, it->node);
		if (f->v[it->node].kind == TG_FOLD_THREAD)
			cls = "f t";
		else if (f->v[it->node].kind == TG_FOLD_ROOT)
			cls = "f r";
	}
	fprintf(out, "<g class=\"%s\"><title>", cls);
	tg_xml_puts(out, text);
	fputs("\n", out);
	fs_value(out, f, value);
	fprintf(out, ", %.2f%%", pct);
	if (it->node != TG_FOLD_NONE && f->v[it->node].child != TG_FOLD_NONE) {
		fputs(" (self ", out);
		fs_value(out, f, f->v[it->node].self);
		fputs(")", out);
	}
	fprintf(out, "</title><rect x=\"%.4f\" y=\"%.0f\" width=\"%.4f\" height=\"%d\" rx=\"2\" "
		"fill=\"", x, y, width, FS_FRAME_H - 1);
	fs_fill(out, f, it->node);
	fprintf(out, "\"/><text x=\"%.2f\" y=\"%.1f\">", x + 3, y + 12.5);
	fs_label(out, text, (long)floor((width - 6) / FS_CHAR_W) >= 3
		 ? (long)floor((width - 6) / FS_CHAR_W) : 0);
	fputs("</text></g>\n", out);
}

/* Visits the tree in pre-order; fills ST; draws when w->out.  0 or -1. */
static int fs_walk(struct fs_walk *w, struct tg_flamesvg_stats *st)
{
	const struct tg_fold *f = w->f;
	struct fs_item it = { 0, 0, 0, 0, 0 };

	memset(st, 0, sizeof(*st));
	w->top = 0;
	if (fs_push(w, &it) < 0)
		return -1;
	while (w->top) {
		int64_t hidden_value = 0;
		double cursor;
		size_t hidden = 0, nk = 0;

		it = w->stack[--w->top];
		st->drawn += it.node != TG_FOLD_NONE;
		if (it.depth > st->depth)
			st->depth = it.depth;
		if (w->out)
			fs_draw(w, &it);
		if (it.node == TG_FOLD_NONE)
			continue;
		for (size_t c = f->v[it.node].child; c != TG_FOLD_NONE; c = f->v[c].next) {
			if (f->v[c].total <= 0)
				continue;  /* nothing to draw, nothing hidden */
			if ((double)f->v[c].total * w->scale < w->min_px) {
				tg_fold_add(&hidden_value, f->v[c].total);
				hidden += f->v[c].count;
				continue;
			}
			if (nk == w->kids_cap) {
				size_t nc = w->kids_cap ? w->kids_cap * 2 : 64;
				size_t *nv = realloc(w->kids, nc * sizeof(*nv));
				if (!nv)
					return -1;
				w->kids = nv;
				w->kids_cap = nc;
			}
			w->kids[nk++] = c;
		}
		cursor = it.off;
		for (size_t k = 0; k < nk; k++)
			cursor += (double)f->v[w->kids[k]].total;
		st->hidden += hidden;
		if (hidden && (double)hidden_value * w->scale >= w->min_px) {
			struct fs_item box = { TG_FOLD_NONE, cursor, hidden_value, hidden,
					       it.depth + 1 };
			st->boxes++;
			if (fs_push(w, &box) < 0)
				return -1;
		}
		/* pushed last to first, so that the first child is visited next */
		for (size_t k = nk; k-- > 0;) {
			struct fs_item ch = { w->kids[k], 0, 0, 0, it.depth + 1 };
			cursor -= (double)f->v[w->kids[k]].total;
			ch.off = cursor;
			if (fs_push(w, &ch) < 0)
				return -1;
		}
	}
	return 0;
}

/* The page's behaviour; ID is defined before it.  Frames keep their first
 * geometry in fr[]; zooming recomputes x, width and labels from it.  A
 * function of the svg's id, so that several graphs can share a page. */
static const char fs_script[] =
	"(function(ID){\n"
	"var svg=document.getElementById(ID);\n"
	"var W=+svg.getAttribute('width'),PAD=10,CW=7,E=0.002;\n"
	"var details=document.getElementById(ID+'-details');\n"
	"var reset=document.getElementById(ID+'-reset');\n"
	"var match=document.getElementById(ID+'-match');\n"
	"var search=document.getElementById(ID+'-search');\n"
	"var fr=[],gs=svg.querySelectorAll('g.f');\n"
	"function label(f,x,w){var n=Math.floor((w-6)/CW),s=f.name;\n"
	" if(n<3)s='';else if(s.length>n)s=s.slice(0,n-2)+'..';\n"
	" f.t.textContent=s;f.t.setAttribute('x',(x+3).toFixed(2));}\n"
	"function place(f,x,w,show){f.g.style.display=show?'':'none';if(!show)return;\n"
	" f.r.setAttribute('x',x.toFixed(4));f.r.setAttribute('width',w.toFixed(4));label(f,x,w);}\n"
	"function zoom(z){var s=(W-2*PAD)/z.w;\n"
	" for(var i=0;i<fr.length;i++){var f=fr[i];\n"
	"  if(f.y<z.y){var anc=f.x<=z.x+E&&f.x+f.w>=z.x+z.w-E;place(f,PAD,W-2*PAD,anc);"
	"f.g.classList.toggle('a',anc);}\n"
	"  else{f.g.classList.remove('a');place(f,PAD+(f.x-z.x)*s,f.w*s,"
	"f.x>=z.x-E&&f.x+f.w<=z.x+z.w+E&&(f.y>z.y||f===z));}}\n"
	" reset.style.display=z===fr[0]?'none':'';svg.setAttribute('data-zoom',z.name);}\n"
	"function fmt(t){return t.replace('\\n',' \\u2014 ');}\n"
	"for(var i=0;i<gs.length;i++){(function(g){var r=g.querySelector('rect'),"
	"tt=g.querySelector('title');\n"
	" var f={g:g,r:r,t:g.querySelector('text'),x:+r.getAttribute('x'),"
	"w:+r.getAttribute('width'),y:+r.getAttribute('y'),fill:r.getAttribute('fill'),"
	"name:tt.textContent.split('\\n')[0],info:tt.textContent};\n"
	" fr.push(f);\n"
	" g.addEventListener('click',function(){zoom(f);});\n"
	" g.addEventListener('mouseover',function(){details.textContent=fmt(f.info);});\n"
	" g.addEventListener('mouseout',function(){details.textContent=' ';});\n"
	"})(gs[i]);}\n"
	"reset.addEventListener('click',function(){zoom(fr[0]);});\n"
	"function find(){var q=(search.value||'').toLowerCase(),end=-1,sum=0;\n"
	" for(var i=0;i<fr.length;i++){var f=fr[i],m=q!==''&&f.name.toLowerCase().indexOf(q)>=0;\n"
	"  f.r.setAttribute('fill',m?'rgb(230,0,230)':f.fill);f.g.classList.toggle('s',m);\n"
	"  if(m&&f.x>=end-E){sum+=f.w;end=f.x+f.w;}}\n"
	" match.textContent=q===''?'':'Matched: '+(100*sum/fr[0].w).toFixed(1)+'%';}\n"
	"if(search)search.addEventListener('input',find);\n"
	"svg.addEventListener('keydown',function(e){if(e.key==='Escape'){search.value='';"
	"find();zoom(fr[0]);}});\n"
	"svg.setAttribute('data-ready',String(fr.length));\n"
	"})";

int tg_flamesvg_write(FILE *out, const struct tg_fold *f, const struct tg_flamesvg_opts *o,
		      struct tg_flamesvg_stats *stp, struct tg_diag *d)
{
	struct fs_walk w;
	struct tg_flamesvg_stats st;
	const char *id = o->id ? o->id : "tgflame";
	int width = o->width > 0 ? o->width : 1200, height, ret = -1;
	int64_t total = f->n ? f->v[0].total : 0;

	memset(&w, 0, sizeof(w));
	w.f = f;
	w.o = o;
	w.width = width;
	w.min_px = o->min_px > 0 ? o->min_px : 0.1;
	w.scale = total > 0 ? (double)(width - 2 * FS_PAD) / (double)total : 0;
	if (total > 0 && fs_walk(&w, &st) < 0)
		goto oom;
	if (total <= 0)
		memset(&st, 0, sizeof(st));
	height = FS_TOP + (int)(st.depth + 1) * FS_FRAME_H + FS_BOTTOM;

	if (o->standalone)
		fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n", out);
	fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" id=\"%s\" "
		"class=\"tgflame\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"font-family=\"Verdana, 'DejaVu Sans', sans-serif\" font-size=\"12\">\n",
		id, width, height, width, height);
	fprintf(out, "<style>\n"
		"#%s text{fill:#000;pointer-events:none;white-space:pre}\n"
		"#%s g.f{cursor:pointer}\n"
		"#%s g.f:hover rect{stroke:#222;stroke-width:0.7}\n"
		"#%s g.a rect{opacity:0.55}\n"
		"#%s .ctl{fill:#1a4f9c;cursor:pointer;pointer-events:auto;font-size:13px}\n"
		"#%s .sub{fill:#555;font-size:12px}\n"
		"</style>\n", id, id, id, id, id, id);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f6f6f2\"/>\n",
		width, height);
	fprintf(out, "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" font-size=\"17\">", width / 2);
	tg_xml_puts(out, o->title ? o->title : f->metric->what);
	if (f->sampled)
		fputs(" (sampled: estimates)", out);
	fputs("</text>\n", out);
	fprintf(out, "<text class=\"sub\" x=\"%d\" y=\"43\" text-anchor=\"middle\">total ",
		width / 2);
	fs_value(out, f, total);
	fprintf(out, " \xc2\xb7 %zu frames drawn", st.drawn);
	if (st.hidden)
		fprintf(out, " \xc2\xb7 %zu frames narrower than %.1f px hidden", st.hidden, w.min_px);
	if (st.boxes)
		fprintf(out, " (%zu grey boxes stand for them)", st.boxes);
	if (f->metric->metric == TG_FOLD_DELTA && f->neg) {
		fputs(" \xc2\xb7 own-code frees not shown: ", out);
		fs_value(out, f, f->neg);
	}
	if (f->sampled)
		fprintf(out, " \xc2\xb7 one sample per %" PRId64 " B on average", f->sampled);
	fputs("</text>\n", out);
	fprintf(out, "<text id=\"%s-reset\" class=\"ctl\" x=\"%d\" y=\"64\" style=\"display:none\">"
		"\xe2\x86\xa9 Reset zoom</text>\n", id, FS_PAD);
	fprintf(out, "<text id=\"%s-match\" class=\"sub\" x=\"%d\" y=\"64\" text-anchor=\"end\">"
		"</text>\n", id, width - FS_PAD - 230);
	fprintf(out, "<foreignObject x=\"%d\" y=\"48\" width=\"220\" height=\"24\">"
		"<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"%s-search\" type=\"search\" "
		"placeholder=\"Search frames\" title=\"Highlights the frames whose text contains "
		"this (Esc: clear)\" style=\"width:212px;font:12px Verdana,sans-serif\"/>"
		"</foreignObject>\n", width - FS_PAD - 220, id);
	if (total > 0) {
		w.out = out;
		if (fs_walk(&w, &st) < 0)
			goto oom;
	} else {
		fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">nothing to draw: "
			"every frame's value is 0</text>\n", width / 2, FS_TOP + 12);
	}
	fprintf(out, "<text id=\"%s-details\" x=\"%d\" y=\"%d\"> </text>\n", id, FS_PAD,
		height - 10);
	fputs("<script type=\"text/javascript\"><![CDATA[\n", out);
	fputs(fs_script, out);
	fprintf(out, "('%s');\n]]></script>\n</svg>\n", id);
	if (ferror(out)) {
		tg_error(d, "unable to write the flame graph");
		goto out;
	}
	if (stp)
		*stp = st;
	ret = 0;
	goto out;
oom:
	tg_error(d, "out of memory");
out:
	free(w.stack);
	free(w.kids);
	return ret;
}
