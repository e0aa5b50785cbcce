"""Item response theory over EvenHand runs (docs/IRT.md): a 2PL model fitted by ``girth`` on the GT items'
responses of many runs (:mod:`.fit`), an informative core subset under the suite's balance constraints
(:mod:`.select`), adaptive evaluation of a new model (:mod:`.adaptive`), and a simulated population with
planted item parameters and abilities to check all three against (:mod:`.simulate`). The 2PL's formulas
(probability, Fisher information, the grid posterior of an ability) are :mod:`.model`."""
