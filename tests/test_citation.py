"""The citation files agree: CITATION.cff's preferred citation is the README's BibTeX entry, and LICENSE is the
Apache-2.0 text that pyproject.toml declares."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _bibtex_fields(readme):
    """title, authors as (family, given) pairs and year of the README's ``bibtex`` block."""
    block = re.search(r'```bibtex\n(.*?)```', readme, re.S).group(1)
    fields = {key: ' '.join(value.split()) for key, value in re.findall(r'(\w+)\s*=\s*\{([^{}]*)\}', block)}
    authors = [tuple(part.strip() for part in name.split(',')) for name in fields['author'].split(' and ')]
    return fields['title'], authors, int(fields['year'])


def test_citation_cff_names_the_papers_title_authors_and_year_of_the_readme():
    cff = yaml.safe_load((ROOT / 'CITATION.cff').read_text())
    title, authors, year = _bibtex_fields((ROOT / 'README.md').read_text())
    paper = cff['preferred-citation']
    assert cff['cff-version'] == '1.2.0' and paper['type'] == 'conference-paper'
    assert paper['title'] == title == 'Bridging the Divide: Reconsidering Softmax and Linear Attention'
    assert [(a['family-names'], a['given-names']) for a in paper['authors']] == authors
    assert len(authors) == 9 and authors[0] == ('Han', 'Dongchen') and authors[-1] == ('Huang', 'Gao')
    assert paper['year'] == year == 2024


def test_license_is_the_apache_2_text_that_pyproject_declares():
    declared = re.search(r'^license = "(.*)"$', (ROOT / 'pyproject.toml').read_text(), re.M).group(1)
    text = (ROOT / 'LICENSE').read_text()
    assert declared == 'Apache-2.0' == yaml.safe_load((ROOT / 'CITATION.cff').read_text())['license']
    assert text.splitlines()[0].strip() == 'Apache License'
    assert 'Version 2.0, January 2004' in text and 'END OF TERMS AND CONDITIONS' in text
