"""The console's presentation: labels, forms, presenters, charts and htmx helpers the pages share."""
