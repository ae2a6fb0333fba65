//! Renderings of result.json: HTML report with inline SVG charts, merge and compare
