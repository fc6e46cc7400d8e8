"""The local review UI: `hivemem ui`, a standard-library HTTP server that acts as the owner through the client."""
