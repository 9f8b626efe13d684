"""The Python kernel DSL (tracing Python functions into the smalti dialect): not built yet."""
