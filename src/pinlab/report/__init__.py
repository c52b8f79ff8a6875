"""Reports of studies: statistics tables (terminal, CSV, JSON), pictures and a self-contained HTML page."""
