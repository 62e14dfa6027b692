"""Output layers: the terminal (rich), and the formats registered in gpugap.render.outputs
(JSON, Markdown, JUnit, GitHub annotations, the timeline as HTML, SVG, PNG)."""
