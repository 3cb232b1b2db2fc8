"""Small networking helpers shared by Samsa's HTTP servers."""
