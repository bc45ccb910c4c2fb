"""PersistBench's rebuild from YouTube: recipes -> sources (yt-dlp) -> reconstruct -> download (the loop)."""
