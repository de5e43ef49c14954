"""paravg: Kaldi-style parallel training of DNN acoustic models as a Snakemake workflow.

Povey, Zhang & Khudanpur, *Parallel training of DNNs with Natural Gradient and Parameter
Averaging* (arXiv 1410.7455): N jobs train copies of the model with natural-gradient SGD
on different data and the copies are averaged every iteration. All logic lives in this
package; the Snakemake rules call it through thin scripts in ``scripts/``.
"""

__version__ = "0.1.0"
