package pypi

import (
	"fmt"
	"html"
	"net/url"
	"strings"
)

// parseHTML reads a PEP 503 project page: each <a> is a file, its text the
// file name, its href the URL (with #sha256=... when the index gives the
// hash), data-requires-python and data-yanked its attributes. Pages are
// generated and hold nothing else of interest, so a small scanner of tags
// does; a <base href> changes what the links are relative to.
func parseHTML(body []byte, base *url.URL) ([]File, error) {
	s := string(body)
	var out []File
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			return out, nil
		}
		s = s[i+1:]
		if strings.HasPrefix(s, "!--") {
			end := strings.Index(s, "-->")
			if end < 0 {
				return out, nil
			}
			s = s[end+3:]
			continue
		}
		name, attrs, rest, ok := readTag(s)
		if !ok {
			return out, nil
		}
		s = rest
		switch name {
		case "base":
			if href, ok := attrs["href"]; ok {
				u, err := base.Parse(href)
				if err != nil {
					return nil, fmt.Errorf("<base href=%q>: %w", href, err)
				}
				base = u
			}
		case "a":
			href, ok := attrs["href"]
			if !ok {
				continue
			}
			end := strings.Index(strings.ToLower(s), "</a")
			if end < 0 {
				return nil, fmt.Errorf("<a href=%q> without </a>", href)
			}
			text := strings.TrimSpace(html.UnescapeString(s[:end]))
			s = s[end:]
			u, err := base.Parse(href)
			if err != nil {
				return nil, fmt.Errorf("file %q: %w", text, err)
			}
			f := File{Filename: text}
			withFragmentHash(&f, u)
			f.RequiresPython = attrs["data-requires-python"]
			_, f.Yanked = attrs["data-yanked"]
			f.CoreMetadata = coreMetadataAttr(attrs)
			out = append(out, f)
		}
	}
}

// readTag reads a tag's name and attributes from s, which follows a '<'.
// Attribute values are unescaped; names are lowercase.
func readTag(s string) (name string, attrs map[string]string, rest string, ok bool) {
	i := 0
	for i < len(s) && !isSpace(s[i]) && s[i] != '>' && s[i] != '/' {
		i++
	}
	name = strings.ToLower(s[:i])
	attrs = map[string]string{}
	for {
		for i < len(s) && (isSpace(s[i]) || s[i] == '/') {
			i++
		}
		if i >= len(s) {
			return "", nil, "", false
		}
		if s[i] == '>' {
			return name, attrs, s[i+1:], true
		}
		start := i
		for i < len(s) && !isSpace(s[i]) && s[i] != '=' && s[i] != '>' && s[i] != '/' {
			i++
		}
		key := strings.ToLower(s[start:i])
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) || s[i] != '=' {
			attrs[key] = ""
			continue
		}
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			return "", nil, "", false
		}
		var val string
		if q := s[i]; q == '"' || q == '\'' {
			end := strings.IndexByte(s[i+1:], q)
			if end < 0 {
				return "", nil, "", false
			}
			val = s[i+1 : i+1+end]
			i += end + 2
		} else {
			start := i
			for i < len(s) && !isSpace(s[i]) && s[i] != '>' {
				i++
			}
			val = s[start:i]
		}
		attrs[key] = html.UnescapeString(val)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
