package static

import (
	"path"
	"strings"
)

// types are the content types the handler names, by extension: the web's
// page, style, script, image, font, media and data formats. Any other
// extension is application/octet-stream, which a browser does not render.
var types = map[string]string{
	// pages, styles, scripts, text
	".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8",
	".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
	".mjs": "text/javascript; charset=utf-8", ".txt": "text/plain; charset=utf-8",
	".md": "text/markdown; charset=utf-8", ".markdown": "text/markdown; charset=utf-8",
	".csv": "text/csv; charset=utf-8", ".xml": "application/xml",
	// data
	".json": "application/json", ".map": "application/json", ".jsonld": "application/ld+json",
	".webmanifest": "application/manifest+json", ".wasm": "application/wasm",
	".pdf": "application/pdf", ".zip": "application/zip", ".ics": "text/calendar; charset=utf-8",
	".rss": "application/rss+xml", ".atom": "application/atom+xml",
	// images
	".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".gif": "image/gif", ".webp": "image/webp", ".avif": "image/avif", ".ico": "image/x-icon",
	".bmp": "image/bmp", ".apng": "image/apng",
	// fonts
	".woff": "font/woff", ".woff2": "font/woff2", ".ttf": "font/ttf", ".otf": "font/otf",
	".eot": "application/vnd.ms-fontobject",
	// media
	".mp4": "video/mp4", ".webm": "video/webm", ".ogv": "video/ogg", ".mov": "video/quicktime",
	".mp3": "audio/mpeg", ".ogg": "audio/ogg", ".oga": "audio/ogg", ".opus": "audio/ogg",
	".wav": "audio/wav", ".m4a": "audio/mp4", ".flac": "audio/flac", ".aac": "audio/aac",
	".vtt": "text/vtt; charset=utf-8",
}

func contentType(name string) string {
	if t, ok := types[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	return "application/octet-stream"
}
