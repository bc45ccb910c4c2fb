"""Reading and writing what comes from outside: files (atomic, bounded, strict JSON), names, images, video, archives read in place, HTTP, the Hub, limits."""
