"""Jobs: what a translation is asked to do besides translating its sentences, composed once.

    job        `TranslationJob`: the features asked for, checked against the one table of which
               combine, bound to a translator, lines in and finished sentences or paragraphs out
    documents  each line a paragraph: cut into sentences and put back with its spacing
    markup     inline tags taken out before translation and put back around the aligned words
    glossary   source terms that must be translated a given way, applied as required phrases

Both faces (`cli.translate`, `serve.routes`) describe a request as a job and let it compose the
parts; neither composes documents, markup or glossaries itself. Import from the modules
themselves: this package's own module imports nothing.
"""
