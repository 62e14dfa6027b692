"""Output layers: terminal (rich), JSON, Markdown, JUnit. The CLI picks one."""
