"""The broker's HTTP admin listener (`admin.http.listeners`): /metrics, /health/*, the console."""
