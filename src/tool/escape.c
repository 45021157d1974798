// SPDX-License-Identifier: GPL-2.0-only
/*
 * Text that a VM's owner controls (the VMM's command name, its command
 * line and so QEMU's -name, the id string of a stats file read from a
 * directory), made safe for a terminal before any text output shows it.
 *
 * Whoever may run a VMM chooses these bytes, and whoever monitors the
 * host reads them in a terminal: an escape sequence there repaints or
 * retitles the screen, a newline forges a line of a table.  So, as ps(1)
 * does for command lines, nothing but printable text goes out as it is:
 *
 *   \ \n \t \r           become \\ \n \t \r
 *   other C0 bytes, DEL  become \xHH
 *   bytes that are not UTF-8, and in a locale whose character set is not
 *   UTF-8 every byte above 0x7f
 *                        become \xHH
 *   C1 controls (U+0080 to U+009F, which some terminals take as CSI and
 *   the like) and the invisible formatting characters that reorder or hide
 *   text (bidirectional overrides and isolates, zero-width characters,
 *   line and paragraph separators, the byte order mark)
 *                        become \uHHHH
 *
 * The result is reversible and shows what the bytes were.
 */
#define _GNU_SOURCE
#include <langinfo.h>
#include <locale.h>
#include <stdint.h>
#include <string.h>

#include "render.h"

static bool utf8_out = true;

void text_escape_init(void)
{
	const char *cs;

	if (!setlocale(LC_CTYPE, "")) {
		utf8_out = false;
		return;
	}
	cs = nl_langinfo(CODESET);
	utf8_out = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
}

void text_escape_utf8(bool on)
{
	utf8_out = on;
}

uint32_t utf8_code_point(const unsigned char *p, size_t n)
{
	static const unsigned char lead_mask[] = { 0, 0x7f, 0x1f, 0x0f, 0x07 };
	uint32_t cp = p[0] & lead_mask[n];
	size_t i;

	for (i = 1; i < n; i++)
		cp = (cp << 6) | (p[i] & 0x3f);
	return cp;
}

bool hidden_char(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) ||	 /* C1 controls */
	       cp == 0x061c ||			 /* Arabic letter mark */
	       (cp >= 0x200b && cp <= 0x200f) || /* zero width, LRM, RLM */
	       (cp >= 0x2028 && cp <= 0x202e) || /* separators, embeddings */
	       (cp >= 0x2060 && cp <= 0x2069) || /* word joiner, isolates */
	       cp == 0xfeff;			 /* byte order mark */
}

/*
 * The escaped form of the character at @p into @e (at most 6 bytes, its
 * length in *@el); returns how many bytes of @p it stands for.
 */
static size_t escape_one(const unsigned char *p, char *e, size_t *el)
{
	static const char hex[] = "0123456789abcdef";
	size_t n;

	if (*p >= 0x20 && *p < 0x7f && *p != '\\') {
		e[0] = (char)*p;
		*el = 1;
		return 1;
	}
	if (*p == '\\' || *p == '\n' || *p == '\t' || *p == '\r') {
		e[0] = '\\';
		e[1] = *p == '\\' ? '\\' :
		       *p == '\n' ? 'n' :
		       *p == '\t' ? 't' :
				    'r';
		*el = 2;
		return 1;
	}
	if (*p >= 0x80 && utf8_out && (n = utf8_seq_len(p)) > 0) {
		uint32_t cp = utf8_code_point(p, n);

		if (!hidden_char(cp)) {
			memcpy(e, p, n);
			*el = n;
			return n;
		}
		e[0] = '\\';
		e[1] = 'u';
		e[2] = hex[cp >> 12 & 0xf];
		e[3] = hex[cp >> 8 & 0xf];
		e[4] = hex[cp >> 4 & 0xf];
		e[5] = hex[cp & 0xf];
		*el = 6;
		return n;
	}
	e[0] = '\\';
	e[1] = 'x';
	e[2] = hex[*p >> 4];
	e[3] = hex[*p & 0xf];
	*el = 4;
	return 1;
}

size_t text_escape(char *out, size_t room, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;

	if (!room)
		return 0;
	while (*p) {
		char e[8];
		size_t el, n = escape_one(p, e, &el);

		if (o + el >= room)
			break; /* only whole characters and escapes */
		memcpy(out + o, e, el);
		o += el;
		p += n;
	}
	out[o] = '\0';
	return o;
}

const char *esc(const char *s, char *buf, size_t len)
{
	text_escape(buf, len, s ? s : "");
	return buf;
}

void fput_escaped(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		char e[8];
		size_t el;

		p += escape_one(p, e, &el);
		fwrite(e, 1, el, f);
	}
}

bool guest_name_is(const char *name, const char *sel)
{
	char buf[4 * 128 + 1];

	if (!name || !name[0])
		return false;
	return !strcmp(name, sel) || !strcmp(esc(name, buf, sizeof(buf)), sel);
}
